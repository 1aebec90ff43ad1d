"""Adaptive-step solves of an encoder block's ODE dy/dt = F(y) over [0, T] (torchdiffeq).

The step size is accepted when ‖e / (atol + rtol·max(|y|, |y'|))‖ ≤ 1, with the RMS norm taken
over non-padding positions only, so padding never changes the steps a sentence gets. Time is
kept in float32 whatever the state's dtype (torchdiffeq's controller fails in float16).
Adaptive steps are chosen for the whole batch at once: valid for an encoder, never for a causal
decoder (the controller would see future positions, and incremental decoding needs a fixed grid).
Dropout masks are fixed for the duration of one solve: a field that changes at every evaluation
defeats the error controller (hundreds of rejected steps instead of tens).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional, Tuple

import torch
from torch import Tensor
from torchdiffeq import odeint

ADAPTIVE_METHODS = ("dopri5", "bosh3")


def padding_aware_rms(padding_mask: Optional[Tensor]) -> Callable[[Tensor], Tensor]:
    """RMS over the positions where ``padding_mask`` (B, T) is False; y is (T, B, C)."""

    def norm(ratio: Tensor) -> Tensor:
        if padding_mask is None:
            return ratio.pow(2).mean().sqrt()
        keep = (~padding_mask).t().unsqueeze(-1).to(ratio.dtype)  # (T, B, 1)
        count = keep.sum() * ratio.size(-1)
        return (ratio.pow(2) * keep).sum().div(count).sqrt()

    return norm


@dataclass(frozen=True)
class AdaptiveSolver:
    """dopri5 / bosh3 over [0, interval] with tolerances, a minimum step and float32 time."""

    method: str
    rtol: float = 1e-3
    atol: float = 1e-4
    min_step: float = 0.0
    interval: float = 1.0

    def __post_init__(self) -> None:
        if self.method not in ADAPTIVE_METHODS:
            raise ValueError(
                f"unknown adaptive method {self.method!r}; choose one of: {', '.join(ADAPTIVE_METHODS)}"
            )
        if self.rtol <= 0 or self.atol <= 0 or self.min_step < 0:
            raise ValueError(
                f"--ode-rtol and --ode-atol must be > 0 and --ode-min-step >= 0 "
                f"(got {self.rtol}, {self.atol}, {self.min_step})"
            )

    def solve(
        self, field: Callable[[Tensor], Tensor], y0: Tensor, padding_mask: Optional[Tensor]
    ) -> Tuple[Tensor, int]:
        """y(interval) and the number of function evaluations it took."""
        evaluations = 0
        seed = int(torch.randint(0, 2**62, (1,)).item())
        devices = [y0.device] if y0.device.type == "cuda" else []

        def counted(_t: Tensor, y: Tensor) -> Tensor:
            nonlocal evaluations
            evaluations += 1
            with torch.random.fork_rng(devices=devices):
                torch.manual_seed(seed)
                return field(y)

        times = torch.tensor([0.0, self.interval], dtype=torch.float32, device=y0.device)
        options = dict(norm=padding_aware_rms(padding_mask), min_step=self.min_step, dtype=torch.float32)
        trajectory = odeint(
            counted, y0, times, method=self.method, rtol=self.rtol, atol=self.atol, options=options
        )
        return trajectory[-1], evaluations
