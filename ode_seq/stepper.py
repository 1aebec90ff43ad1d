"""One explicit Runge–Kutta stepper for any tableau and any vector field.

    k_i = F(y + h Σ_{j<i} a_ij k_j, i),    y' = y + h Σ_i w_i k_i

F receives the stage index i so that callers can give each stage its own state (a decoder's
per-stage key/value cache) or time t + c_i h (non-autonomous fields). The output weights w are
the tableau's b unless a ``combine`` function (learned coefficients) is given.
"""
from __future__ import annotations

from typing import Callable, List, Optional, Sequence

import torch
from torch import Tensor
from torch.utils.checkpoint import checkpoint

from .tableaus import ButcherTableau

VectorField = Callable[[Tensor, int], Tensor]
StageCombination = Callable[[Sequence[Tensor]], Tensor]


def weighted_sum(weights: Sequence[float], ks: Sequence[Tensor]) -> Optional[Tensor]:
    """Σ_j w_j k_j over the non-zero weights (None when all are zero)."""
    total: Optional[Tensor] = None
    for w, k in zip(weights, ks):
        if w == 0.0:
            continue
        term = k if w == 1.0 else k * w
        total = term if total is None else total + term
    return total


def rk_stages(
    field: VectorField,
    y: Tensor,
    tableau: ButcherTableau,
    h: float = 1.0,
    checkpoint_stages: bool = False,
) -> List[Tensor]:
    """The stage values k_1 … k_s of one step from y.

    With ``checkpoint_stages`` each stage's activations are recomputed in the backward pass
    (only the stage inputs y + h Σ a_ij k_j are kept), when gradients are being recorded.
    """
    ks: List[Tensor] = []
    use_checkpoint = checkpoint_stages and torch.is_grad_enabled()
    for i, row in enumerate(tableau.a):
        increment = weighted_sum(row, ks)
        y_i = y if increment is None else y + (increment if h == 1.0 else h * increment)
        if use_checkpoint:
            ks.append(checkpoint(field, y_i, i, use_reentrant=False))
        else:
            ks.append(field(y_i, i))
    return ks


def rk_step(
    field: VectorField,
    y: Tensor,
    tableau: ButcherTableau,
    h: float = 1.0,
    combine: Optional[StageCombination] = None,
    checkpoint_stages: bool = False,
) -> Tensor:
    """y' = y + h Σ_i w_i k_i with w = b, or ``combine(ks)`` = Σ_i w_i k_i when given."""
    ks = rk_stages(field, y, tableau, h, checkpoint_stages)
    increment = combine(ks) if combine is not None else weighted_sum(tableau.b, ks)
    assert increment is not None, "a tableau's b sums to 1, so some weight is non-zero"
    return y + (increment if h == 1.0 else h * increment)


def integrate_fixed_grid(
    field: Callable[[float, Tensor], Tensor],
    y0: Tensor,
    t0: float,
    t1: float,
    steps: int,
    tableau: ButcherTableau,
) -> Tensor:
    """Solve dy/dt = F(t, y) from t0 to t1 with ``steps`` equal steps; stage i sees t_n + c_i h."""
    if steps < 1:
        raise ValueError(f"steps must be a positive integer, got {steps}")
    h = (t1 - t0) / steps
    y = y0
    for n in range(steps):
        t_n = t0 + n * h
        y = rk_step(lambda z, i: field(t_n + tableau.c[i] * h, z), y, tableau, h)
    return y
