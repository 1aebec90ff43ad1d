"""Solvers of dy/dt = F(t, y), apart from any vector field: torch and torchdiffeq only.

Every solver has ``solve(field, y, observer=None, padding_mask=None) -> y(T)`` and calls
``field(t, z, step, stage)``; observers see each stage (:mod:`.observers`). Methods are data:
Butcher tableaus (:mod:`.tableaus`) for the fixed grid (:mod:`.fixed_grid`, where the time
convention is documented), torchdiffeq's embedded pairs for adaptive steps (:mod:`.adaptive`).
Learned weights of a step (output weights, a multistep corrector's) are :mod:`.coefficients`;
PCformer's predictor–corrector steps, a fixed grid with one more evaluation and a cross-step history
carried in and out, :mod:`.predictor_corrector`; DLCL mixes of a stack's states (layer history, the
public code's corrector) :mod:`.dlcl`; the solvers of a stack's blocks :mod:`.stack_solvers`.
Solvers hold no parameters: the weights are modules of the blocks or the stack, given to them.
Nothing here imports fairseq.
"""

from typing import Union

from .adaptive import ADAPTIVE_METHODS, AdaptiveMethod, AdaptiveSolveError, AdaptiveSolver
from .coefficients import (
    COEFFICIENT_MODES,
    EMAWeights,
    FixedWeights,
    FreeWeights,
    MultistepCorrector,
    StageGate,
    build_combiner,
)
from .dlcl import DLCL, HISTORY_TYPES, StateHistory
from .fixed_grid import FixedGridSolver, SplitField, VectorField, weighted_sum
from .observers import EvaluationCounter, ObserverGroup, SolveObserver
from .predictor_corrector import CORRECTORS, PredictorCorrectorSolver, StackHistory
from .stack_solvers import StackSolvers
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
    "DLCL",
    "EMAWeights",
    "EvaluationCounter",
    "FixedGridSolver",
    "FixedWeights",
    "FreeWeights",
    "HISTORY_TYPES",
    "MultistepCorrector",
    "ObserverGroup",
    "PredictorCorrectorSolver",
    "SolveObserver",
    "Solver",
    "SplitField",
    "StackHistory",
    "StackSolvers",
    "StageGate",
    "StateHistory",
    "TABLEAUS",
    "VectorField",
    "build_combiner",
    "get_tableau",
    "weighted_sum",
]
