"""The vector field F of a Transformer layer, as a function of its sublayers (torch only).

A layer is a sequence of residual sublayers (self-attention, then the decoder's cross-attention,
then the feed-forward network). Sublayer i adds its branch s_i to the stream x; for a pre-norm
layer s_i(x) = Dropout(M_i(LN_i(x))), which is also the sublayer's own field (RK-sublayer blocks
integrate each s_i in turn). The three fields of a layer are compositions of the s_i:

- ``residual-branch`` (paper form): F_h(z) = Σ_i s_i(z + h Σ_{j<i} s_j), the layer without its
  identity path. Encoder: F(z) = a + f(z + a) with a = s_a(z); decoder: a + c + f(z + a + c) with
  c = s_c(z + a). With h = 1 one Euler step y + F(y) is the pre-norm layer; with h ≠ 1 the layer's
  inner stream advances by h times each branch (a Lie–Trotter splitting), so one Euler step of
  size h is a pre-norm layer whose output projections are scaled by h.
- ``parallel-branch`` (Zhong et al., 2022): F(z) = Σ_i s_i(z), every sublayer reading z; Euler on
  it is the parallel attention∥FFN layer.
- ``whole-layer`` (public-code form): F(z) = L(z), the layer with its residual connections:
  x_0 = z, x_i = N_i(r_i ⊙ x_{i−1} + s_i(x_{i−1})), L(z) = x_n, where N_i is the norm after the sum
  of a post-norm layer and r_i the weight of the identity path (1 unless given).

The two branch forms take no part in N_i or r_i (they need pre-norm layers). Dropout masks are
drawn afresh at every call, i.e. at every Runge–Kutta stage. This module depends on torch only:
it takes the sublayers as functions of the stream, so fairseq's layers and the exported Hugging
Face code (which carries this file unchanged) build F from the same pieces.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional, Sequence

from torch import Tensor

FIELD_FORMS = ("residual-branch", "parallel-branch", "whole-layer")
# What one Runge–Kutta update integrates: the whole layer's F (block), or each sublayer's branch in
# turn (sublayer: RK-sublayer, a Lie–Trotter splitting of the residual-branch field).
SCOPES = ("block", "sublayer")

Branch = Callable[[Tensor], Tensor]


@dataclass(frozen=True)
class Sublayer:
    """One residual sublayer x ↦ N(r ⊙ x + s(x)): its ``branch`` s, the ``norm_after`` N of a
    post-norm layer (None: identity) and the ``residual_weight`` r (None: 1)."""

    branch: Branch
    norm_after: Optional[Branch] = None
    residual_weight: Optional[Tensor] = None


def feed_forward(
    u: Tensor,
    fc1: Branch,
    activation: Branch,
    activation_dropout: Branch,
    fc2: Branch,
    dropout: Branch,
    hidden_norm: Optional[Branch] = None,
) -> Tensor:
    """FFN(u) = Dropout(W_2 N_h(ActDropout(act(W_1 u)))), N_h the identity unless given."""
    hidden = activation_dropout(activation(fc1(u)))
    if hidden_norm is not None:
        hidden = hidden_norm(hidden)
    return dropout(fc2(hidden))


def residual_branch(z: Tensor, sublayers: Sequence[Sublayer], stream_scale: float = 1.0) -> Tensor:
    """F_h(z) = Σ_i s_i(z + h Σ_{j<i} s_j), h = ``stream_scale`` (h = 0: every s_i reads z)."""
    x, total = z, None
    for i, sublayer in enumerate(sublayers):
        s = sublayer.branch(x)
        total = s if total is None else total + s
        if stream_scale != 0.0 and i + 1 < len(sublayers):
            x = x + s if stream_scale == 1.0 else x + stream_scale * s
    assert total is not None, "a layer has at least one sublayer"
    return total


def parallel_branch(z: Tensor, sublayers: Sequence[Sublayer]) -> Tensor:
    """F(z) = Σ_i s_i(z), the residual branch with h = 0."""
    return residual_branch(z, sublayers, stream_scale=0.0)


def whole_layer(z: Tensor, sublayers: Sequence[Sublayer]) -> Tensor:
    """L(z) = x_n, x_i = N_i(r_i ⊙ x_{i−1} + s_i(x_{i−1})), x_0 = z."""
    x = z
    for sublayer in sublayers:
        s = sublayer.branch(x)
        x = (x if sublayer.residual_weight is None else sublayer.residual_weight * x) + s
        if sublayer.norm_after is not None:
            x = sublayer.norm_after(x)
    return x


def layer_field(form: str, z: Tensor, sublayers: Sequence[Sublayer], stream_scale: float = 1.0) -> Tensor:
    """F(z) of the field ``form`` (one of ``FIELD_FORMS``) of a layer made of ``sublayers``."""
    if form == "residual-branch":
        return residual_branch(z, sublayers, stream_scale)
    if form == "parallel-branch":
        return parallel_branch(z, sublayers)
    if form == "whole-layer":
        return whole_layer(z, sublayers)
    raise ValueError(f"field form {form!r} is not valid; choose one of: {', '.join(FIELD_FORMS)}")
