"""Solvers of dy/dt = F(t, y), apart from any vector field: torch and torchdiffeq only.

Every solver has ``solve(field, y, observer=None, padding_mask=None) -> y(T)`` and calls
``field(t, z, step, stage)``; observers see each stage (:mod:`.observers`). Methods are data:
Butcher tableaus (:mod:`.tableaus`) for the fixed grid (:mod:`.fixed_grid`, where the time
convention is documented), torchdiffeq's embedded pairs for adaptive steps (:mod:`.adaptive`).
Output weights of a step, fixed or learned, are :mod:`.coefficients`. Nothing here imports fairseq.
"""

from typing import Union

from .adaptive import ADAPTIVE_METHODS, AdaptiveMethod, AdaptiveSolveError, AdaptiveSolver
from .coefficients import COEFFICIENT_MODES, EMAWeights, FixedWeights, FreeWeights, StageGate, build_combiner
from .fixed_grid import FixedGridSolver, SplitField, VectorField, weighted_sum
from .observers import EvaluationCounter, ObserverGroup, SolveObserver
from .tableaus import TABLEAUS, ButcherTableau, get_tableau

Solver = Union[FixedGridSolver, AdaptiveSolver]

__all__ = [
    "ADAPTIVE_METHODS",
    "AdaptiveMethod",
    "AdaptiveSolveError",
    "AdaptiveSolver",
    "ButcherTableau",
    "COEFFICIENT_MODES",
    "EMAWeights",
    "EvaluationCounter",
    "FixedGridSolver",
    "FixedWeights",
    "FreeWeights",
    "ObserverGroup",
    "SolveObserver",
    "Solver",
    "SplitField",
    "StageGate",
    "TABLEAUS",
    "VectorField",
    "build_combiner",
    "get_tableau",
    "weighted_sum",
]
