"""PCformer's predictor–corrector steps (Li et al., NeurIPS 2024) on a fixed grid.

Step n of a stack (the steps of its blocks in order, each block's steps in turn) takes y_n with
an s-stage Runge–Kutta predictor and one more evaluation of F at the predicted state:

    k_i = F(t_n + c_i h, y_n + h Σ_{j<i} a_ij k_j)    (i = 1 … s)
    P = y_n + h Σ_i w_i k_i                           (w: the step's output weights; the paper's
                                                       are EMA, w_i = β(1−β)^{s−i}, β learned)
    F̂ = F(t_n + h, P)                                 (the corrector's evaluation, stage s)

then corrects with either form:

- ``multistep`` (the paper's): a learned multistep rule over F̂ and the first-stage values of
  this step and the m steps before it in the stack,

      y_{n+1} = y_n + h (α F̂ + Σ_{j=0}^{m} β_j k_1^{(n−j)}),

  k_1^{(n−j)} for n − j < 0 (before the stack's first step) being k_1^{(0)}, as a multistep
  method started from a constant history. The history at a position is computed in the same
  pass at that position, so a causal decoder needs no cache of it across time.
- ``dlcl`` (the public code's): a learned mix of LayerNormed stack states (DLCL),
  h_0 = y_0 (the stack input), h_{n+1} = LN_{n+1}(P); the corrector evaluates F at
  x̃ = Σ_{j ≤ n+1} W_{n+1,j} h_j, replaces h_{n+1} by LN'_{n+1}(F(x̃)) and returns
  y_{n+1} = Σ_{j ≤ n+1} W'_{n+1,j} h_j.

A step is a function of the state it carries, passed in and returned (:meth:`~PredictorCorrectorSolver.
carried_step`): the first-stage values of the stack's steps so far (multistep), or the stack's
states h_0 … h_n (dlcl). The weights are the block's (α, β_j: a :class:`~.coefficients.
MultistepCorrector`) or the stack's (W, W', LN, LN': a :class:`~.dlcl.StateHistory`), given as
functions, as the output weights are. fairseq's stack loop hands a block x alone, so the blocks of a
stack hand the carried state on through one :class:`StackHistory`: the first block's solve starts
it, each solve reads it once and writes it once.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, List, Optional, Sequence, Tuple, Union

from torch import Tensor

from .coefficients import MultistepCorrector
from .dlcl import StateHistory
from .fixed_grid import Carried, FixedGridSolver, SplitField, VectorField, advance
from .observers import SolveObserver

CORRECTORS = ("none", "multistep", "dlcl")


class StackHistory:
    """What the predictor–corrector solves of one stack hand on within one forward pass:
    ``values``, the first-stage values k_1 of its steps so far, oldest first (multistep), or its
    states h_0 … h_n (dlcl)."""

    def __init__(self) -> None:
        self.values: Sequence[Tensor] = ()


@dataclass(frozen=True)
class PredictorCorrectorSolver(FixedGridSolver):
    """Fixed-grid predictor–corrector steps (see the module docstring): the tableau and ``combine``
    make the predictor, stage index s is the corrector's evaluation; either ``corrector`` (the
    paper's form) or ``states`` (the public code's) is given. ``history``: the stack's;
    ``starts_history``: this is the stack's first block, whose solve starts it."""

    corrector: Optional[MultistepCorrector] = None
    states: Optional[StateHistory] = None
    history: StackHistory = dataclasses.field(default_factory=StackHistory)
    starts_history: bool = False

    def __post_init__(self) -> None:
        if (self.corrector is None) == (self.states is None):
            raise ValueError("a predictor-corrector solver takes a multistep corrector or a state history")

    @property
    def form(self) -> str:
        return "multistep" if self.states is None else "dlcl"

    @property
    def evaluations_per_step(self) -> int:
        return self.tableau.stages + 1

    @property
    def history_length(self) -> int:
        """m: the earlier first-stage values a multistep step reads besides its own."""
        return self.corrector.length - 1

    def corrector_time(self, step: int) -> float:
        """t_{n+1} = (n + 1) h, where the corrector evaluates F."""
        return (step + 1) * self.step_size

    def start(self, y: Tensor) -> Carried:
        """The state carried into the stack's first step from its input y_0."""
        return () if self.states is None else (y,)

    def step(self, *args: Any, **kwargs: Any) -> Tensor:
        """Refused: a step reads and returns the state the stack carries (:meth:`carried_step`)."""
        raise TypeError("a predictor-corrector step needs the state the stack carries: call carried_step with it")

    def carried_in(self, field: Union[VectorField, SplitField], y: Tensor) -> Carried:
        """The stack's history from the blocks before (see :class:`StackHistory`), or started here
        from the stack's input y_0 by its first block."""
        if isinstance(field, SplitField):
            raise TypeError("a predictor-corrector step integrates the whole field, not a split one")
        return self.start(y) if self.starts_history else tuple(self.history.values)

    def carried_step(
        self, field: VectorField, y: Tensor, step: int, carried: Carried, observer: Optional[SolveObserver] = None
    ) -> Tuple[Tensor, Carried]:
        """(y_{n+1}, the state carried on) from y_n and the state ``carried`` in."""
        if self.states is None:
            earlier = carried[::-1][: self.history_length]
            y_next, first_stages = self.multistep_step(field, y, earlier, step, observer)
            return y_next, (*carried, first_stages[0])
        ks = self.stage_values(field, y, step, observer)
        x = self.states.corrector_input(carried, advance(y, self.increment(ks), self.step_size))
        correction = self.evaluate(field, self.corrector_time(step), x, step, self.tableau.stages, observer)
        return self.states.correct(carried, correction)

    def multistep_step(
        self,
        field: VectorField,
        y: Tensor,
        earlier: Sequence[Tensor],
        step: int,
        observer: Optional[SolveObserver] = None,
    ) -> Tuple[Tensor, List[Tensor]]:
        """(y_{n+1}, [k_1^{(n)}, …, k_1^{(n−m)}]) from y_n and ``earlier`` = k_1^{(n−1)}, … (at most
        m, newest first; the oldest value stands in for those before the stack's first step)."""
        ks = self.stage_values(field, y, step, observer)
        prediction = advance(y, self.increment(ks), self.step_size)
        f_hat = self.evaluate(field, self.corrector_time(step), prediction, step, self.tableau.stages, observer)
        first_stages = [ks[0], *earlier]
        first_stages += [first_stages[-1]] * (self.corrector.length - len(first_stages))
        return advance(y, self.corrector(f_hat, first_stages), self.step_size), first_stages

    def carried_out(self, carried: Carried) -> None:
        """Hands the stack's history on to the blocks after."""
        self.history.values = carried
