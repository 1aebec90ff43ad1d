"""Runge–Kutta blocks whose vector field is the stable ODE-ViT layer.

The blocks are :mod:`ode_seq.blocks`' encoder/decoder blocks (any tableau, steps, weight-shared
groups, per-stage decoder caches) built through fairseq's layer hooks: bias-free attention
(:class:`StableMultiheadAttention`, dot or L2 kernel) and feed-forward projections, CenterNorm
in place of every LayerNorm of the field, every projection initialised with spectral norm 1 and
optionally constrained to it. Options come from the model config: ``attention_kernel`` and
``spectral_norm_constraint``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator

from torch import nn

from ..blocks import DecoderODEBlock, EncoderODEBlock, Integration
from .attention import ATTENTION_KERNELS, StableMultiheadAttention
from .center_norm import CenterNorm
from .spectral import constrain_spectral_norm, spectral_init_

PROJECTIONS = ("q_proj", "k_proj", "v_proj", "out_proj")


@dataclass(frozen=True)
class StableFieldConfig:
    """The stable field's options, read from a fairseq model config."""

    attention_kernel: str = "dot"
    spectral_norm_constraint: bool = False

    @classmethod
    def from_cfg(cls, cfg: Any) -> "StableFieldConfig":
        kernel = getattr(cfg, "attention_kernel", None) or cls.attention_kernel
        if kernel not in ATTENTION_KERNELS:
            raise ValueError(
                f"--attention-kernel {kernel!r} is not valid; choose one of: {', '.join(ATTENTION_KERNELS)}"
            )
        return cls(kernel, bool(getattr(cfg, "spectral_norm_constraint", False)))


def _check_options(cfg: Any, relative_positions: int) -> None:
    if relative_positions > 0:
        raise ValueError(
            "stable ODE blocks have no relative position keys: pass "
            "--encoder-relative-positions 0 --decoder-relative-positions 0"
        )
    if cfg.quant_noise.pq > 0:
        raise ValueError("stable ODE blocks do not support --quant-noise-pq; set it to 0")


class _StableField:
    """Mixin: the hooks and the post-construction changes shared by encoder and decoder blocks."""

    stable: StableFieldConfig

    def build_fc1(self, input_dim, output_dim, q_noise, qn_block_size):
        return nn.Linear(input_dim, output_dim, bias=False)

    def build_fc2(self, input_dim, output_dim, q_noise, qn_block_size):
        return nn.Linear(input_dim, output_dim, bias=False)

    def _field_linears(self) -> Iterator[nn.Linear]:
        attentions = [self.self_attn, getattr(self, "encoder_attn", None)]
        for attention in attentions:
            if attention is not None:
                yield from (getattr(attention, name) for name in PROJECTIONS)
        yield self.fc1
        yield self.fc2

    def _stabilise(self) -> None:
        """CenterNorm for every LayerNorm of the field; spectral-norm-1 projections."""
        for name in ("self_attn_layer_norm", "encoder_attn_layer_norm", "final_layer_norm"):
            if getattr(self, name, None) is not None:
                setattr(self, name, CenterNorm(self.embed_dim))
        for linear in self._field_linears():
            spectral_init_(linear)
            if self.stable.spectral_norm_constraint:
                constrain_spectral_norm(linear)


class StableEncoderODEBlock(_StableField, EncoderODEBlock):
    """Encoder block with the stable field; called like fairseq's encoder layer."""

    def __init__(
        self,
        cfg,
        integration: Integration,
        combiner: nn.Module,
        field_form: str = "residual-branch",
        relative_positions: int = 0,
    ) -> None:
        _check_options(cfg, relative_positions)
        self.stable = StableFieldConfig.from_cfg(cfg)
        super().__init__(cfg, integration, combiner, field_form, relative_positions)
        self._stabilise()

    def build_self_attention(self, embed_dim, cfg):
        return StableMultiheadAttention(
            embed_dim,
            cfg.encoder.attention_heads,
            kernel=self.stable.attention_kernel,
            dropout=cfg.attention_dropout,
            self_attention=True,
        )


class StableDecoderODEBlock(_StableField, DecoderODEBlock):
    """Decoder block with the stable field in self- and cross-attention; per-stage caches."""

    def __init__(
        self,
        cfg,
        integration: Integration,
        combiner: nn.Module,
        field_form: str = "residual-branch",
        relative_positions: int = 0,
        no_encoder_attn: bool = False,
    ) -> None:
        _check_options(cfg, relative_positions)
        self.stable = StableFieldConfig.from_cfg(cfg)
        super().__init__(cfg, integration, combiner, field_form, relative_positions, no_encoder_attn)
        if self.attn_ln is not None or self.ffn_layernorm is not None or self.w_resid is not None:
            raise ValueError(
                "stable ODE blocks do not support --scale-attn, --scale-fc or --scale-resids "
                "(they add LayerNorms or residual weights to the field)"
            )
        self._stabilise()

    def build_self_attention(self, embed_dim, cfg, add_bias_kv=False, add_zero_attn=False):
        if add_bias_kv or add_zero_attn:
            raise ValueError("stable ODE blocks do not support add_bias_kv or add_zero_attn")
        return StableMultiheadAttention(
            embed_dim,
            cfg.decoder.attention_heads,
            kernel=self.stable.attention_kernel,
            dropout=cfg.attention_dropout,
            self_attention=not cfg.cross_self_attention,
        )

    def build_encoder_attention(self, embed_dim, cfg):
        return StableMultiheadAttention(
            embed_dim,
            cfg.decoder.attention_heads,
            kernel=self.stable.attention_kernel,
            kdim=cfg.encoder.embed_dim,
            vdim=cfg.encoder.embed_dim,
            dropout=cfg.attention_dropout,
            encoder_decoder_attention=True,
        )
