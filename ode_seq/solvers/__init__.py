"""Solvers of dy/dt = F(t, y), apart from any vector field: torch and torchdiffeq only.

Every solver has ``solve(field, y, observer=None, padding_mask=None) -> y(T)`` and calls
``field(t, z, step, stage)``; observers see each stage (:mod:`.observers`). Methods are data:
Butcher tableaus (:mod:`.tableaus`) for the fixed grid (:mod:`.fixed_grid`, where the time
convention is documented), torchdiffeq's embedded pairs for adaptive steps (:mod:`.adaptive`).
Output weights of a step, fixed or learned, are :mod:`.coefficients`; PCformer's predictor–corrector
steps, a fixed grid with one more evaluation and a cross-step history, :mod:`.predictor_corrector`.
Nothing here imports fairseq.
"""

from typing import Union

from .adaptive import ADAPTIVE_METHODS, AdaptiveMethod, AdaptiveSolveError, AdaptiveSolver
from .coefficients import COEFFICIENT_MODES, EMAWeights, FixedWeights, FreeWeights, StageGate, build_combiner
from .fixed_grid import FixedGridSolver, SplitField, VectorField, weighted_sum
from .observers import EvaluationCounter, ObserverGroup, SolveObserver
from .predictor_corrector import (
    CORRECTORS,
    FirstStageHistory,
    MultistepCorrector,
    PredictorCorrectorSolver,
    StateHistory,
)
from .tableaus import TABLEAUS, ButcherTableau, get_tableau

Solver = Union[FixedGridSolver, AdaptiveSolver]

__all__ = [
    "ADAPTIVE_METHODS",
    "AdaptiveMethod",
    "AdaptiveSolveError",
    "AdaptiveSolver",
    "ButcherTableau",
    "COEFFICIENT_MODES",
    "CORRECTORS",
    "EMAWeights",
    "EvaluationCounter",
    "FirstStageHistory",
    "FixedGridSolver",
    "FixedWeights",
    "FreeWeights",
    "MultistepCorrector",
    "ObserverGroup",
    "PredictorCorrectorSolver",
    "SolveObserver",
    "Solver",
    "SplitField",
    "StageGate",
    "StateHistory",
    "TABLEAUS",
    "VectorField",
    "build_combiner",
    "get_tableau",
    "weighted_sum",
]
