"""Adaptive-step solves of dy/dt = F(t, y) over [0, T] with torchdiffeq's dopri5 and bosh3.

A step is accepted when ‖e / (atol + rtol·max(|y|, |y'|))‖ ≤ 1, with the RMS norm taken over
non-padding positions only, so padding never changes the steps a sentence gets. The state, time
and that norm are float32 whatever the model's dtype; the field is evaluated in the model's dtype.
(torchdiffeq's controller fails in float16: the squared error ratio overflows to inf, every step
is rejected and the step size underflows; and a bfloat16 state loses the small increments of
small steps; docs/benchmarks.md has the measurements.) The norm only chooses steps, so
no gradient flows through it. A solve makes at most ``max_evaluations`` field evaluations;
tolerances too tight for the state's precision would otherwise shrink the steps for minutes or
until the step size underflows, and either ends in an :class:`AdaptiveSolveError` that names the
tolerances. Step sizes are
chosen for the whole batch at once: valid for an encoder, never for a causal decoder (the
controller would see future positions, and incremental decoding needs a fixed grid). Dropout
masks are fixed for the duration of one solve: a field that changes at every evaluation defeats
the error controller (hundreds of rejected steps instead of tens).

Steps and stages: torchdiffeq's ``callback_step`` event marks each attempted step, so the field
and the observers receive (step, stage) as on a fixed grid. Step a is the a-th attempted step
(accepted or rejected); its evaluations are stages 1 … s−1, because both methods are FSAL (a
step's stage 0 is the previous step's last evaluation). The two evaluations torchdiffeq makes
before its first step (the slope at t = 0 and the probe that picks the first step size) have
step −1 and stages 0 and 1.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Dict, List, Optional

import torch
from torch import Tensor
from torchdiffeq import odeint

from .fixed_grid import VectorField
from .observers import SolveObserver


@dataclass(frozen=True)
class AdaptiveMethod:
    """An embedded Runge–Kutta pair of torchdiffeq: its order and stage count s (FSAL)."""

    name: str
    order: int
    stages: int

    @property
    def evaluations_per_step(self) -> int:
        return self.stages - 1


ADAPTIVE_METHODS: Dict[str, AdaptiveMethod] = {
    m.name: m for m in (AdaptiveMethod("dopri5", 5, 7), AdaptiveMethod("bosh3", 3, 4))
}


def padding_aware_rms(padding_mask: Optional[Tensor]) -> Callable[[Tensor], Tensor]:
    """RMS over the positions where ``padding_mask`` (B, T) is False; y is (T, B, C). Computed in
    float32 (the squares of ratios up to 1/rtol overflow float16) and without gradient: the error
    estimate chooses the steps and is no part of the loss (a gradient through it would overflow
    float16 into the embeddings' gradient)."""

    def norm(ratio: Tensor) -> Tensor:
        ratio = ratio.detach().float()
        if padding_mask is None:
            return ratio.pow(2).mean().sqrt()
        keep = (~padding_mask).t().unsqueeze(-1).float()  # (T, B, 1)
        count = keep.sum() * ratio.size(-1)
        return (ratio.pow(2) * keep).sum().div(count).sqrt()

    return norm


class AdaptiveSolveError(RuntimeError):
    """An adaptive solve that cannot finish: the evaluation cap was reached or the step size
    underflowed. The message names the method, the tolerances and how far the solve got."""


class _Evaluations:
    """torchdiffeq's ``func(t, y)``: calls the field with (t, z, step, stage) under one dropout
    seed, in the model's ``dtype`` (the solver's state is float32), and reports each evaluation;
    its ``callback_step`` hook counts attempted steps and records the step size. More than
    ``limit`` evaluations raise :class:`AdaptiveSolveError`."""

    def __init__(
        self, field: VectorField, observer: Optional[SolveObserver], device, dtype: torch.dtype, limit: int
    ) -> None:
        self.field = field
        self.observer = observer
        self.dtype = dtype
        self.limit = limit
        self.seed = int(torch.randint(0, 2**62, (1,)).item())
        self.devices: List[torch.device] = [device] if device.type == "cuda" else []
        self.step, self.stage = -1, 0
        self.count, self.time, self.dt = 0, 0.0, float("nan")

    def __call__(self, t: Tensor, z: Tensor) -> Tensor:
        if self.count == self.limit:
            raise AdaptiveSolveError(f"the limit of {self.limit} per solve")
        self.count += 1
        step, stage, time = self.step, self.stage, float(t.detach())
        self.stage += 1
        with torch.random.fork_rng(devices=self.devices):
            torch.manual_seed(self.seed)
            k = self.field(time, z.to(self.dtype), step, stage).float()
        if self.observer is not None:
            self.observer.stage_evaluated(step, stage, time, z, k)
        return k

    def callback_step(self, t0: Tensor, y0: Tensor, dt: Tensor) -> None:
        self.step, self.stage = self.step + 1, 1
        self.time, self.dt = float(t0.detach()), float(dt.detach())


@dataclass(frozen=True)
class AdaptiveSolver:
    """dopri5 / bosh3 over [0, interval] with tolerances rtol, atol, a minimum step and at most
    ``max_evaluations`` field evaluations per solve."""

    method: str
    rtol: float = 1e-3
    atol: float = 1e-4
    min_step: float = 0.0
    interval: float = 1.0
    max_evaluations: int = 1000

    @property
    def scheme(self) -> AdaptiveMethod:
        return ADAPTIVE_METHODS[self.method]

    def solve(
        self,
        field: VectorField,
        y: Tensor,
        observer: Optional[SolveObserver] = None,
        padding_mask: Optional[Tensor] = None,
    ) -> Tensor:
        """y(T) from y(0) = y; ``padding_mask`` (B, T) marks positions the error norm ignores."""
        if observer is not None:
            observer.solve_started(self, y)
        times = torch.tensor([0.0, self.interval], dtype=torch.float32, device=y.device)
        options = dict(norm=padding_aware_rms(padding_mask), min_step=self.min_step, dtype=torch.float32)
        evaluations = _Evaluations(field, observer, y.device, y.dtype, self.max_evaluations)
        try:
            trajectory = odeint(
                evaluations,
                y.float(),
                times,
                method=self.method,
                rtol=self.rtol,
                atol=self.atol,
                options=options,
            )
        except AdaptiveSolveError as error:
            raise self._stuck(str(error), evaluations, y.dtype) from None
        except AssertionError as error:  # torchdiffeq's check that t0 + dt > t0
            if not str(error).startswith("underflow in dt"):
                raise
            raise self._stuck(f"the step size underflowed ({error})", evaluations, y.dtype) from None
        if observer is not None:
            observer.solve_finished(trajectory[-1])
        return trajectory[-1].to(y.dtype)

    def _stuck(self, why: str, evaluations: _Evaluations, dtype: torch.dtype) -> AdaptiveSolveError:
        return AdaptiveSolveError(
            f"{self.method} with rtol {self.rtol:g}, atol {self.atol:g} ({dtype}) stopped at t = "
            f"{evaluations.time:.4g} of [0, {self.interval:g}] (step size {evaluations.dt:.3g}) "
            f"after {evaluations.count} field evaluations: {why}"
        )
