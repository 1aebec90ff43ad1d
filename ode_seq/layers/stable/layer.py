"""The stable layer kind: Runge–Kutta blocks whose vector field is the stable ODE-ViT layer.

Built through fairseq's layer hooks: bias-free attention (:class:`StableMultiheadAttention`,
dot or L2 kernel) and feed-forward projections; then CenterNorm in place of every LayerNorm of
the field, and every projection initialised with spectral norm 1 and optionally constrained to it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Iterator

from torch import nn

from ode_seq.options import check_choice, option

from ..blocks import register_layer_kind
from ..kind import LayerKind
from .attention import ATTENTION_KERNELS, StableMultiheadAttention
from .center_norm import CenterNorm
from .spectral import constrain_spectral_norm, spectral_init_

PROJECTIONS = ("q_proj", "k_proj", "v_proj", "out_proj")
NORMS = ("self_attn_layer_norm", "encoder_attn_layer_norm", "final_layer_norm")


@dataclass(frozen=True)
class StableConfig:
    """The stable field's options."""

    prefix: ClassVar[str] = ""
    attention_kernel: str = option(
        "dot",
        "attention logits: dot = q.k/sqrt(d), l2 = -|q - k|^2/sqrt(d) (Lipschitz)",
        choices=ATTENTION_KERNELS,
    )
    spectral_norm_constraint: bool = option(
        False,
        "keep every projection of the field at spectral norm 1 during training "
        "(power-iteration reparametrisation); without it only the initialisation has norm 1",
    )

    def validate(self) -> None:
        check_choice("--attention-kernel", self.attention_kernel, ATTENTION_KERNELS)


@register_layer_kind("stable")
class StableLayer(LayerKind):
    """CenterNorm, bias-free spectral-norm-1 projections, dot or L2 attention."""

    options_class: ClassVar[type] = StableConfig

    @classmethod
    def check_corrector(cls, side: str, corrector: str) -> None:
        raise ValueError(
            f"--{side}-ode-corrector {corrector}: the stable kind bounds its Runge-Kutta steps by a "
            "field of Lipschitz constant about 1, which a corrector's learned, unbounded weights over "
            f"earlier steps would not keep: use --{side}-ode-corrector none, or an ode_transformer model"
        )

    def check_layer_options(self, cfg: Any) -> None:
        if self.relative_positions > 0:
            raise ValueError(
                "stable ODE blocks have no relative position keys: pass "
                "--encoder-relative-positions 0 --decoder-relative-positions 0"
            )
        if cfg.quant_noise.pq > 0:
            raise ValueError("stable ODE blocks do not support --quant-noise-pq; set it to 0")

    def _attention(self, embed_dim: int, cfg: Any, **kwargs: Any) -> StableMultiheadAttention:
        """Dot-product attention; :meth:`finish_layer` sets the kernel the options ask for."""
        return StableMultiheadAttention(
            embed_dim,
            getattr(cfg, self.side).attention_heads,
            dropout=cfg.attention_dropout,
            **kwargs,
        )

    def build_self_attention(self, embed_dim, cfg, add_bias_kv=False, add_zero_attn=False):
        if add_bias_kv or add_zero_attn:
            raise ValueError("stable ODE blocks do not support add_bias_kv or add_zero_attn")
        cross_self = self.side == "decoder" and cfg.cross_self_attention
        return self._attention(embed_dim, cfg, self_attention=not cross_self)

    def build_encoder_attention(self, embed_dim, cfg):
        return self._attention(
            embed_dim,
            cfg,
            kdim=cfg.encoder.embed_dim,
            vdim=cfg.encoder.embed_dim,
            encoder_decoder_attention=True,
        )

    def build_fc1(self, input_dim, output_dim, q_noise, qn_block_size):
        return nn.Linear(input_dim, output_dim, bias=False)

    def build_fc2(self, input_dim, output_dim, q_noise, qn_block_size):
        return nn.Linear(input_dim, output_dim, bias=False)

    def _attentions(self) -> Iterator[StableMultiheadAttention]:
        for attention in (self.self_attn, getattr(self, "encoder_attn", None)):
            if attention is not None:
                yield attention

    def _field_linears(self) -> Iterator[nn.Linear]:
        for attention in self._attentions():
            yield from (getattr(attention, name) for name in PROJECTIONS)
        yield self.fc1
        yield self.fc2

    def finish_layer(self, cfg: Any) -> None:
        """The attention kernel; CenterNorm for every LayerNorm of the field; spectral-norm-1
        projections."""
        scaled = [getattr(self, name, None) for name in ("attn_ln", "ffn_layernorm", "w_resid")]
        if any(module is not None for module in scaled):
            raise ValueError(
                "stable ODE blocks do not support --scale-attn, --scale-fc or --scale-resids "
                "(they add LayerNorms or residual weights to the field)"
            )
        for attention in self._attentions():
            attention.kernel = self.spec.options.attention_kernel
        for name in NORMS:
            if getattr(self, name, None) is not None:
                setattr(self, name, CenterNorm(self.embed_dim))
        for linear in self._field_linears():
            spectral_init_(linear)
            if self.spec.options.spectral_norm_constraint:
                constrain_spectral_norm(linear)
