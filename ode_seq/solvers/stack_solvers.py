"""The fixed-grid solvers of one stack's blocks, from the stack's options (torch only): fairseq's
stacks (:mod:`ode_seq.models.stacks`) and the exported Hugging Face code (which carries this file)
build them here.

Every block of a stack takes the same method: N steps of a tableau over [0, T], its output weights
``coefficients`` (:mod:`.coefficients`; a one-stage method has none), and with a ``corrector``
PCformer's predictor–corrector steps (:mod:`.predictor_corrector`), whose blocks hand the stack's
history on to each other.
"""

from __future__ import annotations

from typing import Optional, Tuple

from torch import nn

from .coefficients import MultistepCorrector, build_combiner
from .dlcl import StateHistory
from .fixed_grid import FixedGridSolver
from .predictor_corrector import PredictorCorrectorSolver, StackHistory
from .tableaus import ButcherTableau


class StackSolvers:
    """The solvers of a stack of ``blocks`` blocks, made one at a time in block order by
    :meth:`next` (a block's new weights are made when it is). ``coefficients``: the output weights'
    mode, one module per block (``learned-shared``: one for the stack, unless ``share_gate`` is
    false, as where each block keeps its own copy); ``corrector``: none, multistep (α, β_j per
    block over ``corrector_history`` m earlier first-stage values) or dlcl (``states``, the
    stack's, which the stack registers); ``nodes``: the stages' times, if not the tableau's."""

    def __init__(
        self,
        tableau: ButcherTableau,
        blocks: int,
        embed_dim: int,
        steps: int = 1,
        interval: float = 1.0,
        coefficients: str = "fixed",
        corrector: str = "none",
        corrector_history: int = 0,
        share_gate: bool = True,
        checkpoint_stages: bool = False,
        nodes: Optional[Tuple[float, ...]] = None,
    ) -> None:
        self.tableau, self.embed_dim = tableau, embed_dim
        self.grid = dict(steps=steps, interval=float(interval), checkpoint_stages=checkpoint_stages, nodes=nodes)
        self.mode = coefficients if tableau.stages > 1 else "fixed"
        self.share_gate = share_gate and self.mode == "learned-shared"
        self.corrector, self.corrector_history = corrector, corrector_history
        self.states = StateHistory(blocks, embed_dim) if corrector == "dlcl" else None
        self.history = StackHistory()
        self.shared_gate: Optional[nn.Module] = None
        self.built = 0

    def combiner(self) -> nn.Module:
        """Σ_i w_i k_i of the next block."""
        if not self.share_gate:
            return build_combiner(self.mode, self.tableau, self.embed_dim)
        if self.shared_gate is None:
            self.shared_gate = build_combiner(self.mode, self.tableau, self.embed_dim)
        return self.shared_gate

    def next(self) -> FixedGridSolver:
        """The solver of the next block."""
        grid = dict(self.grid, combine=self.combiner())
        first = self.built == 0
        self.built += 1
        if self.corrector == "none":
            return FixedGridSolver(self.tableau, **grid)
        if self.states is not None:
            weights = dict(states=self.states)
        else:
            weights = dict(corrector=MultistepCorrector(self.corrector_history))
        return PredictorCorrectorSolver(self.tableau, **grid, **weights, history=self.history, starts_history=first)
