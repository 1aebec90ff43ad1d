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

from torch import Tensor

from .relative_attention import RelativePositionSelfAttention

FIELD_FORMS = ("residual-branch", "parallel-branch", "whole-layer")


class LayerField:
    """Mixin for a fairseq layer: records Σ sublayer outputs through ``residual_connection``,
    and builds Shaw relative self-attention when ``relative_positions`` > 0."""

    side: str  # "encoder" or "decoder"
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

    def run_recording(self, forward: Callable[[], Any]) -> Tuple[Any, Tensor]:
        """(the layer's output, F(z)) for one call of its unchanged forward."""
        self._branch = None
        try:
            out = forward()
        finally:
            branch, self._branch = self._branch, None
        layer_output = out[0] if isinstance(out, tuple) else out
        return out, layer_output if self.field_form == "whole-layer" else branch

    def build_self_attention(self, embed_dim, cfg, *args, **kwargs):
        if self.relative_positions == 0:
            return super().build_self_attention(embed_dim, cfg, *args, **kwargs)
        return RelativePositionSelfAttention(
            embed_dim,
            getattr(cfg, self.side).attention_heads,
            max_relative_position=self.relative_positions,
            dropout=cfg.attention_dropout,
        )
