"""Finite-time Lyapunov exponents by the QR method, for whole systems and per token.

Along a trajectory x^{l+1} = f_l(x^l) with tangent maps J_l, start from Q_0 = I (first m
columns) and repeat

    Q_{l+1} R_{l+1} = J_l Q_l          (QR factorisation),

accumulating log|diag R|. After L maps of time step dt the m exponents are

    λ_i = (1 / (L·dt)) Σ_l log|R_{l+1, ii}|.

Token level (Tong et al., 2025, §2, as their code computes it): for a state of T tokens, the last
position j and each input token k carry their own Q_k, propagated by the tangent map

    M_l^{jk} = I + ∂(Φ_l − id)_j / ∂x_k^l      (Euler, Φ_l(x) = x + dt f_l(x): I + dt ∂f_j/∂x_k)

for every token k, i.e. the Jacobian block ∂x_j^{l+1}/∂x_k^l plus the identity also for k ≠ j.
Token k's score is its largest exponent: the growth rate of a perturbation under the coupling
∂f_j/∂x_k along depth, a sensitivity of position j to token k (not the exponent of the full
system). Because every factor is I + O(dt), the exponents have a limit as the step count grows;
the bare blocks ∂x_j^{l+1}/∂x_k^l (identity only for k = j, this package's earlier definition)
are O(dt) for k ≠ j, so their exponents go like log(dt)/dt and diverge under refinement, which is
why that definition was dropped. A direction a map annihilates contributes log of the smallest
positive float64 instead of −∞.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable, Optional, Sequence

import numpy as np
import torch
from torch import Tensor

_TINY = torch.finfo(torch.float64).tiny


class QRAccumulator:
    """Propagates a batch of orthonormal frames Q (B, d, m) and sums log|diag R| (B, m)."""

    def __init__(self, batch: int, dim: int, num_exponents: int) -> None:
        if not 1 <= num_exponents <= dim:
            raise ValueError(f"num_exponents must be in 1..{dim} (the state size), got {num_exponents}")
        self.q = torch.eye(dim, num_exponents, dtype=torch.float64).repeat(batch, 1, 1)
        self.log_growth = torch.zeros(batch, num_exponents, dtype=torch.float64)

    def step(self, jacobians: Tensor) -> None:
        """One map: jacobians (B, d, d)."""
        q, r = torch.linalg.qr(jacobians.double() @ self.q)
        self.q = q
        self.log_growth += torch.diagonal(r, dim1=-2, dim2=-1).abs().clamp_min(_TINY).log()


def lyapunov_exponents(jacobians: Iterable[Tensor], dt: float, num_exponents: Optional[int] = None) -> np.ndarray:
    """The m finite-time exponents of one trajectory given its tangent maps J_l (d × d)."""
    accumulator: Optional[QRAccumulator] = None
    steps = 0
    for jac in jacobians:
        if accumulator is None:
            accumulator = QRAccumulator(1, jac.shape[0], num_exponents or jac.shape[0])
        accumulator.step(jac.unsqueeze(0))
        steps += 1
    if accumulator is None:
        raise ValueError("Lyapunov exponents need at least one tangent map")
    return (accumulator.log_growth[0] / (steps * dt)).numpy()


@dataclass
class TokenLyapunov:
    """exponents (T, m) after all maps; running_max (L, T): token scores after maps 1 … L."""

    exponents: np.ndarray
    running_max: np.ndarray

    @property
    def scores(self) -> np.ndarray:
        """Per input token k: its largest exponent."""
        return self.exponents.max(axis=-1)


def position_jacobians(f: Callable[[Tensor], Tensor], x: Tensor, position: int) -> Tensor:
    """J^{jk} = ∂f(x)_j / ∂x_k for every token k, shape (T, d, d), for x of shape (T, d)."""
    jac = torch.autograd.functional.jacobian(lambda z: f(z)[position], x, vectorize=True)
    return jac.permute(1, 0, 2)


def token_tangent_maps(f: Callable[[Tensor], Tensor], x: Tensor, position: int) -> Tensor:
    """M^{jk} = I + ∂(f − id)_j/∂x_k for every token k (T, d, d): the Jacobian block plus the
    identity for k ≠ j (for k = j the block already holds it)."""
    jac = position_jacobians(f, x, position)
    tokens, dim = x.shape
    others = torch.ones(tokens, dtype=jac.dtype)
    others[position] = 0
    return jac + others[:, None, None] * torch.eye(dim, dtype=jac.dtype)


def token_lyapunov_exponents(
    maps: Sequence[Callable[[Tensor], Tensor]],
    x0: Tensor,
    position: int = -1,
    dt: float = 1.0,
    num_exponents: Optional[int] = None,
) -> TokenLyapunov:
    """Token exponents of position ``position`` along x^{l+1} = maps[l](x^l), x^0 = x0 (T, d),
    with the tangent maps of :func:`token_tangent_maps`."""
    if not maps:
        raise ValueError("token Lyapunov exponents need at least one map")
    tokens, dim = x0.shape
    accumulator = QRAccumulator(tokens, dim, num_exponents or dim)
    running = []
    x = x0.detach()
    for l, f in enumerate(maps):
        accumulator.step(token_tangent_maps(f, x, position))
        running.append((accumulator.log_growth / ((l + 1) * dt)).max(dim=-1).values)
        with torch.no_grad():
            x = f(x)
    exponents = (accumulator.log_growth / (len(maps) * dt)).numpy()
    return TokenLyapunov(exponents=exponents, running_max=torch.stack(running).numpy())
