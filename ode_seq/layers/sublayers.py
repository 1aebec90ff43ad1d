"""The sublayers of a pre-norm fairseq layer as vector fields, for RK-sublayer blocks.

ODE Transformer's RK-sublayer variant (Li et al., 2022, ablation) applies the Runge–Kutta
update to each sublayer separately, with its own field F = LN → sublayer → dropout:

    encoder:  F_a(z) = Dropout(SelfAttn(LN_1 z)),   F_f(z) = Dropout(FFN(LN_2 z))
    decoder:  F_a, then F_c(z) = Dropout(CrossAttn(LN_2 z, encoder_out)), then F_f (on LN_3 z)

FFN(u) = W_2 ActDropout(act(W_1 u)). The block's step is the method applied to F_a from y_n, then
to F_c and F_f, each from the previous result (a :class:`~ode_seq.solvers.SplitField`); Euler on
it is exactly the pre-norm layer. The functions below read the layer's own modules (so layer
kinds that replace norms or attention keep working) and compute what fairseq's forward computes
for each sublayer of a pre-norm layer without its optional extras (``--scale-attn``,
``--scale-fc``, ``--scale-heads``, ``--scale-resids``, ``--cross-self-attention``), which
:func:`check_sublayer_layer` refuses.
"""

from __future__ import annotations

from typing import Any, Callable, List, Optional, Tuple

import torch
from torch import Tensor

SCOPES = ("block", "sublayer")
EXTRAS = {
    "attn_ln": "--scale-attn",
    "ffn_layernorm": "--scale-fc",
    "c_attn": "--scale-heads",
    "w_resid": "--scale-resids",
}

Sublayer = Callable[..., Tensor]


def check_sublayer_layer(layer: Any, cfg: Any) -> None:
    """Refuse layer options the sublayer fields leave out (ValueError naming them)."""
    used = [flag for name, flag in EXTRAS.items() if getattr(layer, name, None) is not None]
    if layer.side == "decoder" and cfg.cross_self_attention:
        used.append("--cross-self-attention")
    if used:
        raise ValueError(
            f"--ode-scope sublayer integrates each sublayer of the plain pre-norm layer; "
            f"{', '.join(used)} change(s) the layer: leave them out or use --ode-scope block"
        )


def feed_forward(layer: Any, z: Tensor) -> Tensor:
    """F_f(z) = Dropout(W_2 ActDropout(act(W_1 LN(z))))."""
    hidden = layer.activation_dropout_module(layer.activation_fn(layer.fc1(layer.final_layer_norm(z))))
    return layer.dropout_module(layer.fc2(hidden))


def encoder_sublayers(
    layer: Any, encoder_padding_mask: Optional[Tensor], attn_mask: Optional[Tensor]
) -> Tuple[Sublayer, Sublayer]:
    """(F_a, F_f) of an encoder layer, each (z, state) ↦ F(z) (an encoder has no cache)."""

    def attention(z: Tensor, state: None) -> Tensor:
        mask = attn_mask
        if mask is not None:  # as fairseq's encoder layer: 1 → a large negative logit
            mask = mask.masked_fill(mask.to(torch.bool), -1e8 if z.dtype == torch.float32 else -1e4)
        u = layer.self_attn_layer_norm(z)
        a, _ = layer.self_attn(
            query=u,
            key=u,
            value=u,
            key_padding_mask=encoder_padding_mask,
            need_weights=False,
            attn_mask=mask,
        )
        return layer.dropout_module(a)

    return attention, lambda z, state: feed_forward(layer, z)


def decoder_sublayers(
    layer: Any,
    encoder_out: Optional[Tensor],
    encoder_padding_mask: Optional[Tensor],
    attentions: List[Tensor],
    self_attn_mask: Optional[Tensor] = None,
    self_attn_padding_mask: Optional[Tensor] = None,
    need_attn: bool = False,
    need_head_weights: bool = False,
) -> Tuple[Sublayer, ...]:
    """(F_a, F_c, F_f) of a decoder layer (F_c only with encoder attention and output), each
    (z, incremental state of the stage) ↦ F(z); cross-attention weights go to ``attentions``."""
    need_weights = need_attn or need_head_weights or (not layer.training and layer.need_attn)

    def self_attention(z: Tensor, state: Optional[Any]) -> Tensor:
        u = layer.self_attn_layer_norm(z)
        a, _ = layer.self_attn(
            query=u,
            key=u,
            value=u,
            key_padding_mask=self_attn_padding_mask,
            incremental_state=state,
            need_weights=False,
            attn_mask=self_attn_mask,
        )
        return layer.dropout_module(a)

    def cross_attention(z: Tensor, state: Optional[Any]) -> Tensor:
        u = layer.encoder_attn_layer_norm(z)
        c, attn = layer.encoder_attn(
            query=u,
            key=encoder_out,
            value=encoder_out,
            key_padding_mask=encoder_padding_mask,
            incremental_state=state,
            static_kv=True,
            need_weights=need_weights,
            need_head_weights=need_head_weights,
        )
        if attn is not None:
            attentions.append(attn)
        return layer.dropout_module(c)

    def ffn(z: Tensor, state: Optional[Any]) -> Tensor:
        return feed_forward(layer, z)

    if layer.encoder_attn is None or encoder_out is None:
        return self_attention, ffn
    return self_attention, cross_attention, ffn
