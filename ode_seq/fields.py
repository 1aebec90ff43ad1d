"""Vector fields F built from fairseq's own Transformer layers.

fairseq's layers add each sublayer's output to the stream through ``residual_connection``.
Overriding that hook turns the unchanged layer forward into a vector field:

- ``residual-branch`` (paper form): F(z) = L(z) − z, the layer without its identity path.
  Encoder: F(z) = a + f with a = SelfAttn(LN1 z), f = FFN(LN2(z + a)); the decoder adds
  the cross-attention term in the same sequential way. One Euler stage y + F(y) is the
  pre-norm layer.
- ``parallel-branch`` (Zhong et al., 2022): every sublayer reads the block input,
  F(z) = SelfAttn(LN1 z) + FFN(LN2 z) (decoder: + CrossAttn(LN2 z), FFN on LN3 z); Euler on
  this field is the parallel attention∥FFN layer.
- ``whole-layer`` (public-code form): F(z) = L(z), residual connections included.

With ``stream_scale`` h ≠ 1 the residual branch advances the layer's inner stream by h times
each sublayer output (F_h(z) = a + f(z + h·a), a Lie–Trotter splitting): one Euler step of size h
is then exactly a pre-norm layer whose output projections are scaled by h.

Dropout masks are drawn afresh at every call, i.e. at every Runge–Kutta stage.
"""
from __future__ import annotations

from typing import Any, Callable, Optional, Tuple

from fairseq.modules.transformer_layer import (
    TransformerDecoderLayerBase,
    TransformerEncoderLayerBase,
)
from torch import Tensor

from .relative_attention import RelativePositionSelfAttention

FIELD_FORMS = ("residual-branch", "parallel-branch", "whole-layer")


class _BranchRecorder:
    """Mixin: records Σ sublayer outputs through the ``residual_connection`` hook."""

    field_form: str = "residual-branch"
    relative_positions: int = 0
    stream_scale: float = 1.0
    _branch: Optional[Tensor] = None

    def residual_connection(self, x: Tensor, residual: Tensor) -> Tensor:
        if self.field_form == "whole-layer":
            return residual + x
        self._branch = x if self._branch is None else self._branch + x
        if self.field_form == "parallel-branch":
            return residual
        return residual + x if self.stream_scale == 1.0 else residual + self.stream_scale * x

    def _run_recording(self, forward: Callable[[], Any]) -> Tuple[Any, Tensor]:
        """(the layer's output, F(z)) for one call of its unchanged forward."""
        self._branch = None
        try:
            out = forward()
        finally:
            branch, self._branch = self._branch, None
        layer_output = out[0] if isinstance(out, tuple) else out
        return out, layer_output if self.field_form == "whole-layer" else branch

    def _relative_self_attention(self, embed_dim: int, cfg, decoder: bool):
        heads = cfg.decoder.attention_heads if decoder else cfg.encoder.attention_heads
        return RelativePositionSelfAttention(
            embed_dim,
            heads,
            max_relative_position=self.relative_positions,
            dropout=cfg.attention_dropout,
        )


class EncoderLayerField(_BranchRecorder, TransformerEncoderLayerBase):
    """fairseq's encoder layer as a vector field: ``field(z, padding_mask, attn_mask)``."""

    def __init__(self, cfg, field_form: str, relative_positions: int = 0) -> None:
        self.field_form = field_form
        self.relative_positions = relative_positions
        super().__init__(cfg)

    def build_self_attention(self, embed_dim, cfg):
        if self.relative_positions > 0:
            return self._relative_self_attention(embed_dim, cfg, decoder=False)
        return super().build_self_attention(embed_dim, cfg)

    def field(
        self, z: Tensor, encoder_padding_mask: Optional[Tensor], attn_mask: Optional[Tensor] = None
    ) -> Tensor:
        _, k = self._run_recording(
            lambda: TransformerEncoderLayerBase.forward(self, z, encoder_padding_mask, attn_mask)
        )
        return k


class DecoderLayerField(_BranchRecorder, TransformerDecoderLayerBase):
    """fairseq's decoder layer as a vector field; ``field`` returns (F(z), attention)."""

    def __init__(
        self, cfg, field_form: str, no_encoder_attn: bool = False, relative_positions: int = 0
    ) -> None:
        self.field_form = field_form
        self.relative_positions = relative_positions
        super().__init__(cfg, no_encoder_attn)

    def build_self_attention(self, embed_dim, cfg, add_bias_kv=False, add_zero_attn=False):
        if self.relative_positions > 0:
            return self._relative_self_attention(embed_dim, cfg, decoder=True)
        return super().build_self_attention(embed_dim, cfg, add_bias_kv, add_zero_attn)

    def field(self, z: Tensor, **layer_kwargs):
        (_, attn, _), k = self._run_recording(
            lambda: TransformerDecoderLayerBase.forward(self, z, **layer_kwargs)
        )
        return k, attn
