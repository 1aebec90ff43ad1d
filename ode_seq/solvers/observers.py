"""What a solver tells the world while it solves: one hook interface, called per step and stage.

A solver calls, for one solve of dy/dt = F(t, y) from y_0,

    solve_started(solver, y_0)
    stage_evaluated(step, stage, t, z, k)      once per evaluation k = F(t, z)
    solve_finished(y)                          with the solution the solver returns

Analysis, recording and counting are observers of a solve; none of them changes the solver, the
field or the module that runs them. Observers must not modify the tensors they are given.
"""

from __future__ import annotations

from typing import Any, Iterable, Tuple

from torch import Tensor


class SolveObserver:
    """Hooks on a solve; each does nothing unless overridden."""

    def solve_started(self, solver: Any, y: Tensor) -> None:
        pass

    def stage_evaluated(self, step: int, stage: int, t: float, z: Tensor, k: Tensor) -> None:
        pass

    def solve_finished(self, y: Tensor) -> None:
        pass


class ObserverGroup(SolveObserver):
    """Several observers, called in order."""

    def __init__(self, observers: Iterable[SolveObserver]) -> None:
        self.observers: Tuple[SolveObserver, ...] = tuple(observers)

    def solve_started(self, solver: Any, y: Tensor) -> None:
        for observer in self.observers:
            observer.solve_started(solver, y)

    def stage_evaluated(self, step: int, stage: int, t: float, z: Tensor, k: Tensor) -> None:
        for observer in self.observers:
            observer.stage_evaluated(step, stage, t, z, k)

    def solve_finished(self, y: Tensor) -> None:
        for observer in self.observers:
            observer.solve_finished(y)


class EvaluationCounter(SolveObserver):
    """``count``: the field evaluations (NFE) of the most recent solve."""

    count = 0

    def solve_started(self, solver: Any, y: Tensor) -> None:
        self.count = 0

    def stage_evaluated(self, step: int, stage: int, t: float, z: Tensor, k: Tensor) -> None:
        self.count += 1
