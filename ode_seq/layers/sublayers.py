"""The sublayers of fairseq's Transformer layers, for the fields of :mod:`.fields`.

Each function returns a layer's sublayers as :class:`~.fields.Sublayer` s (branch s_i, the norm
after the sum of a post-norm layer, fairseq's residual weight), computing what fairseq's layer
forward computes for each sublayer, with every option of that forward except the previous
attention states (``prev_self_attn_state``, ``prev_attn_state``, which Runge–Kutta blocks refuse):

    encoder:  s_a(x) = Dropout(SelfAttn(LN_1 x)),   s_f(x) = Dropout(FFN(LN_2 x))
    decoder:  s_a(x) = Dropout(LN_attn(heads_c(SelfAttn(LN_1 x)))),
              s_c(x) = Dropout(CrossAttn(LN_2 x, encoder_out)),   s_f(x) = Dropout(FFN(LN_3 x))

FFN(u) = W_2 [LN_fc] ActDropout(act(W_1 u)); LN_attn (``--scale-attn``), head scales heads_c
(``--scale-heads``), LN_fc (``--scale-fc``) and the residual weight (``--scale-resids``) only
where fairseq's layer has them; with ``--cross-self-attention`` self-attention also attends to
``encoder_out``; a post-norm layer has no LN before its sublayers and one after each sum.

The modules are read from ``layer``: the layer itself, whose kind may have replaced norms or
attention, or :class:`LayerWithWeights`, the same layer with weights θ given from outside.
RK-sublayer blocks integrate each branch in turn; :func:`check_sublayer_layer` refuses the options
that change a pre-norm layer's sublayers there.
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional

import torch
from torch import Tensor, nn
from torch.func import functional_call

from ..fields import Sublayer, feed_forward

EXTRAS = {
    "attn_ln": "--scale-attn",
    "ffn_layernorm": "--scale-fc",
    "c_attn": "--scale-heads",
    "w_resid": "--scale-resids",
}


def check_sublayer_layer(layer: Any, cfg: Any) -> None:
    """Refuse layer options that RK-sublayer blocks leave out (ValueError naming them)."""
    used = [flag for name, flag in EXTRAS.items() if getattr(layer, name, None) is not None]
    if layer.side == "decoder" and cfg.cross_self_attention:
        used.append("--cross-self-attention")
    if used:
        raise ValueError(
            f"--ode-scope sublayer integrates each sublayer of the plain pre-norm layer; "
            f"{', '.join(used)} change(s) the layer: leave them out or use --ode-scope block"
        )


class ModuleWithWeights:
    """``module`` called with ``weights`` (names relative to it) in place of its parameters,
    through ``torch.func.functional_call``; its other attributes are the module's."""

    def __init__(self, module: nn.Module, weights: Dict[str, Tensor]) -> None:
        self.module = module
        self.weights = weights

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return functional_call(self.module, self.weights, args, kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.module, name)


class LayerWithWeights:
    """``layer`` with weights θ (by parameter name) in place of its parameters: a module with
    entries in θ is a :class:`ModuleWithWeights`, a parameter of the layer itself is θ's tensor,
    and every other attribute is the layer's."""

    def __init__(self, layer: nn.Module, weights: Mapping[str, Tensor]) -> None:
        self.layer = layer
        self.weights: Dict[str, Any] = {}
        for name, value in weights.items():
            owner, dot, leaf = name.partition(".")
            if dot:
                self.weights.setdefault(owner, {})[leaf] = value
            else:
                self.weights[name] = value

    def __getattr__(self, name: str) -> Any:
        if name not in self.weights:
            return getattr(self.layer, name)
        value = self.weights[name]
        return ModuleWithWeights(getattr(self.layer, name), value) if isinstance(value, dict) else value


def _pre_norm(layer: Any, norm: Any, x: Tensor) -> Tensor:
    """LN(x) before a sublayer of a pre-norm layer, x itself in a post-norm layer."""
    return norm(x) if layer.normalize_before else x


def _sublayer(layer: Any, branch: Any, norm: Any, residual_weight: Optional[Tensor] = None) -> Sublayer:
    return Sublayer(branch, None if layer.normalize_before else norm, residual_weight)


def _self_attention(
    layer: Any,
    u: Tensor,
    kv: Tensor,
    key_padding_mask: Optional[Tensor],
    attn_mask: Optional[Tensor],
    incremental_state: Optional[Any] = None,
) -> Tensor:
    """SelfAttn(u) with keys and values from ``kv`` (u, or encoder_out and u), without weights."""
    a, _ = layer.self_attn(
        query=u,
        key=kv,
        value=kv,
        key_padding_mask=key_padding_mask,
        incremental_state=incremental_state,
        need_weights=False,
        attn_mask=attn_mask,
    )
    return a


def feed_forward_sublayer(layer: Any) -> Sublayer:
    """s_f(x) = Dropout(FFN(LN x)), with fairseq's ``ffn_layernorm`` and ``w_resid`` if any."""

    def branch(x: Tensor) -> Tensor:
        return feed_forward(
            _pre_norm(layer, layer.final_layer_norm, x),
            layer.fc1,
            layer.activation_fn,
            layer.activation_dropout_module,
            layer.fc2,
            layer.dropout_module,
            getattr(layer, "ffn_layernorm", None),
        )

    return _sublayer(layer, branch, layer.final_layer_norm, getattr(layer, "w_resid", None))


def encoder_sublayers(
    layer: Any, encoder_padding_mask: Optional[Tensor] = None, attn_mask: Optional[Tensor] = None
) -> List[Sublayer]:
    """(s_a, s_f) of an encoder layer."""

    def attention(x: Tensor) -> Tensor:
        mask = attn_mask
        if mask is not None:  # as fairseq's encoder layer: 1 → a large negative logit
            mask = mask.masked_fill(mask.to(torch.bool), -1e8 if x.dtype == torch.float32 else -1e4)
        u = _pre_norm(layer, layer.self_attn_layer_norm, x)
        return layer.dropout_module(_self_attention(layer, u, u, encoder_padding_mask, mask))

    return [_sublayer(layer, attention, layer.self_attn_layer_norm), feed_forward_sublayer(layer)]


def decoder_sublayers(
    layer: Any,
    encoder_out: Optional[Tensor] = None,
    encoder_padding_mask: Optional[Tensor] = None,
    incremental_state: Optional[Any] = None,
    self_attn_mask: Optional[Tensor] = None,
    self_attn_padding_mask: Optional[Tensor] = None,
    need_attn: bool = False,
    need_head_weights: bool = False,
    attentions: Optional[List[Tensor]] = None,
) -> List[Sublayer]:
    """(s_a, s_c, s_f) of a decoder layer (s_c only with encoder attention and output), with the
    caches in ``incremental_state``; cross-attention weights are appended to ``attentions``."""

    def self_attention(x: Tensor) -> Tensor:
        u = _pre_norm(layer, layer.self_attn_layer_norm, x)
        kv, mask, padding = u, self_attn_mask, self_attn_padding_mask
        cached = incremental_state is not None and "prev_key" in layer.self_attn._get_input_buffer(incremental_state)
        if layer.cross_self_attention and not cached:  # fairseq's --cross-self-attention
            assert encoder_out is not None
            if mask is not None:
                mask = torch.cat((u.new_zeros(u.size(0), encoder_out.size(0)), mask), dim=1)
            if padding is not None:
                source = encoder_padding_mask
                if source is None:
                    source = padding.new_zeros(encoder_out.size(1), encoder_out.size(0))
                padding = torch.cat((source, padding), dim=1)
            kv = torch.cat((encoder_out, u), dim=0)
        a = _self_attention(layer, u, kv, padding, mask, incremental_state)
        if layer.c_attn is not None:  # fairseq's --scale-heads
            length, batch = a.size(0), a.size(1)
            heads = a.view(length, batch, layer.nh, layer.head_dim)
            a = torch.einsum("tbhd,h->tbhd", heads, layer.c_attn).reshape(length, batch, layer.embed_dim)
        if layer.attn_ln is not None:
            a = layer.attn_ln(a)
        return layer.dropout_module(a)

    def cross_attention(x: Tensor) -> Tensor:
        c, attn = layer.encoder_attn(
            query=_pre_norm(layer, layer.encoder_attn_layer_norm, x),
            key=encoder_out,
            value=encoder_out,
            key_padding_mask=encoder_padding_mask,
            incremental_state=incremental_state,
            static_kv=True,
            need_weights=need_attn or need_head_weights or (not layer.training and layer.need_attn),
            need_head_weights=need_head_weights,
        )
        if attn is not None and attentions is not None:
            attentions.append(attn)
        return layer.dropout_module(c)

    sublayers = [_sublayer(layer, self_attention, layer.self_attn_layer_norm)]
    if layer.encoder_attn is not None and encoder_out is not None:
        sublayers.append(_sublayer(layer, cross_attention, layer.encoder_attn_layer_norm))
    return sublayers + [feed_forward_sublayer(layer)]
