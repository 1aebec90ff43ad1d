"""Fixed-grid explicit Runge–Kutta solves of dy/dt = F(t, y) over [0, T], for any tableau.

With N steps of size h = T/N, step n = 0 … N−1 takes y_n (at t_n = n h) to

    z_i = y_n + h Σ_{j<i} a_ij k_j,   k_i = F(t_n + c_i h, z_i),
    y_{n+1} = y_n + h Σ_i w_i k_i,

with output weights w = b unless an output combination (learned coefficients,
:mod:`.coefficients`) computes Σ_i w_i k_i.

Time convention (the only one in the package): every solve starts at t = 0, and stage i of
step n evaluates the field at t = (n + c_i) h. The nodes c are the tableau's unless the solver
is given its own ``nodes``: the non-autonomous Transformer of Tong et al. evaluates Euler's
single stage at the right end of its step, nodes = (1,), so its weights at step n are θ((n+1)h).
The field is called as ``field(t, z, step, stage)``; the indices let a causal decoder keep one
key/value cache per (step, stage).

A :class:`SplitField` F = F_1 + … + F_M is integrated by Lie–Trotter splitting: step n applies
the method to F_1 from y_n, then to F_2 from that result, and so on (ODE Transformer's
RK-sublayer: one Runge–Kutta update per sublayer). Each F_m is called with its own stage index
i; observers number the evaluations of a step consecutively, stage m·s + i.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, List, Optional, Protocol, Sequence, Tuple, Union

import torch
from torch import Tensor
from torch.utils.checkpoint import checkpoint

from .observers import SolveObserver
from .tableaus import ButcherTableau

StageCombination = Callable[[Sequence[Tensor]], Tensor]
Carried = Tuple[Tensor, ...]


class VectorField(Protocol):
    """F(t, z) at stage ``stage`` of step ``step``."""

    def __call__(self, t: float, z: Tensor, step: int, stage: int) -> Tensor: ...


@dataclass(frozen=True)
class SplitField:
    """dy/dt = Σ_m F_m(t, y), integrated one part after the other within each step."""

    parts: Tuple[VectorField, ...]


class _StageOffset(SolveObserver):
    """Passes stage evaluations on with stage index ``offset`` + i."""

    def __init__(self, observer: SolveObserver, offset: int) -> None:
        self.observer, self.offset = observer, offset

    def stage_evaluated(self, step: int, stage: int, t: float, z: Tensor, k: Tensor) -> None:
        self.observer.stage_evaluated(step, self.offset + stage, t, z, k)


def weighted_sum(weights: Sequence[float], ks: Sequence[Tensor]) -> Optional[Tensor]:
    """Σ_j w_j k_j over the non-zero weights (None when all are zero)."""
    total: Optional[Tensor] = None
    for w, k in zip(weights, ks):
        if w == 0.0:
            continue
        term = k if w == 1.0 else k * w
        total = term if total is None else total + term
    return total


def advance(y: Tensor, increment: Optional[Tensor], h: float) -> Tensor:
    """y + h·increment (y itself when there is no increment)."""
    if increment is None:
        return y
    return y + (increment if h == 1.0 else h * increment)


@dataclass(frozen=True)
class FixedGridSolver:
    """N steps of an explicit Runge–Kutta method over [0, T] (see the module docstring).

    ``combine``: Σ_i w_i k_i from the stage values of one step (default: the tableau's b).
    ``checkpoint_stages``: while gradients are recorded, keep only each stage's input z_i and
    recompute its activations in the backward pass.
    ``nodes``: the times c_i at which stage i evaluates the field (default: the tableau's c).
    """

    tableau: ButcherTableau
    steps: int = 1
    interval: float = 1.0
    combine: Optional[StageCombination] = None
    checkpoint_stages: bool = False
    nodes: Optional[Tuple[float, ...]] = None

    @property
    def method(self) -> str:
        return self.tableau.name

    @property
    def step_size(self) -> float:
        return self.interval / self.steps

    def stage_time(self, step: int, stage: int) -> float:
        """t = (n + c_i) h of stage i of step n."""
        c = self.nodes if self.nodes is not None else self.tableau.c
        return (step + c[stage]) * self.step_size

    @property
    def evaluations_per_step(self) -> int:
        """Field evaluations of one step (of each part of a split field): its stages."""
        return self.tableau.stages

    def evaluate(
        self, field: VectorField, t: float, z: Tensor, step: int, stage: int, observer: Optional[SolveObserver]
    ) -> Tensor:
        """k = F(t, z) as evaluation ``stage`` of step ``step`` (recomputed in the backward pass
        with ``checkpoint_stages``), told to ``observer``."""
        if self.checkpoint_stages and torch.is_grad_enabled():
            k = checkpoint(field, t, z, step, stage, use_reentrant=False)
        else:
            k = field(t, z, step, stage)
        if observer is not None:
            observer.stage_evaluated(step, stage, t, z, k)
        return k

    def stage_values(
        self, field: VectorField, y: Tensor, step: int, observer: Optional[SolveObserver] = None
    ) -> List[Tensor]:
        """k_1 … k_s of step ``step`` from y = y_n."""
        ks: List[Tensor] = []
        for i, row in enumerate(self.tableau.a):
            z = advance(y, weighted_sum(row, ks), self.step_size)
            ks.append(self.evaluate(field, self.stage_time(step, i), z, step, i, observer))
        return ks

    def increment(self, ks: Sequence[Tensor]) -> Optional[Tensor]:
        """Σ_i w_i k_i: ``combine``'s, or the tableau's b."""
        return self.combine(ks) if self.combine is not None else weighted_sum(self.tableau.b, ks)

    def step(
        self,
        field: Union[VectorField, SplitField],
        y: Tensor,
        step: int,
        observer: Optional[SolveObserver] = None,
    ) -> Tensor:
        """y_{n+1} from y_n for n = ``step`` (each part in turn for a :class:`SplitField`)."""
        if isinstance(field, SplitField):
            stages = self.tableau.stages
            for m, part in enumerate(field.parts):
                offset = None if observer is None else _StageOffset(observer, m * stages)
                y = self.step(part, y, step, offset)
            return y
        return advance(y, self.increment(self.stage_values(field, y, step, observer)), self.step_size)

    def solve(
        self,
        field: Union[VectorField, SplitField],
        y: Tensor,
        observer: Optional[SolveObserver] = None,
        padding_mask: Optional[Tensor] = None,
    ) -> Tensor:
        """y(T) from y(0) = y, each step carrying on the state the method carries (:meth:`carried_in`).
        Positions evolve independently on a fixed grid, so ``padding_mask`` (accepted for the adaptive
        solver's sake) changes nothing."""
        carried = self.carried_in(field, y)
        if observer is not None:
            observer.solve_started(self, y)
        for n in range(self.steps):
            y, carried = self.carried_step(field, y, n, carried, observer)
        if observer is not None:
            observer.solve_finished(y)
        self.carried_out(carried)
        return y

    def carried_in(self, field: Union[VectorField, SplitField], y: Tensor) -> Carried:
        """The state carried into the solve's first step: none, a Runge–Kutta step reads y_n alone."""
        return ()

    def carried_step(
        self,
        field: Union[VectorField, SplitField],
        y: Tensor,
        step: int,
        carried: Carried,
        observer: Optional[SolveObserver] = None,
    ) -> Tuple[Tensor, Carried]:
        """(y_{n+1}, the state carried on) from y_n and the state ``carried`` in."""
        return self.step(field, y, step, observer), carried

    def carried_out(self, carried: Carried) -> None:
        """Hands on the state carried out of the solve's last step: nothing to hand on here."""
