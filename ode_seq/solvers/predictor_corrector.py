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

The history belongs to the stack: the solvers of its blocks share one, and the first block's
solve starts it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple, Union

import torch
from torch import Tensor, nn

from .fixed_grid import FixedGridSolver, SplitField, VectorField, advance
from .observers import SolveObserver

CORRECTORS = ("none", "multistep", "dlcl")


class FirstStageHistory:
    """The first-stage values k_1 of every step of one stack so far, in order (one pass)."""

    def __init__(self) -> None:
        self.values: List[Tensor] = []

    def start(self) -> None:
        self.values = []

    def push(self, k1: Tensor) -> None:
        self.values.append(k1)

    def latest(self, count: int) -> List[Tensor]:
        """k_1^{(n)}, k_1^{(n−1)}, …: the ``count`` newest values (fewer early in the stack)."""
        return self.values[::-1][:count]


class MultistepCorrector(nn.Module):
    """α F̂ + Σ_{j=0}^{m} β_j k_1^{(n−j)}, one α and m + 1 β_j per block, all initialised to
    1/(m + 2): the public code starts its corrector mix (``weight_c``) as a uniform average over
    its terms, here applied to the paper's terms."""

    def __init__(self, history: int) -> None:
        super().__init__()
        if history < 0:
            raise ValueError(f"the corrector's history length m must be >= 0, got {history}")
        uniform = 1.0 / (history + 2)
        self.alpha = nn.Parameter(torch.tensor(uniform))
        self.beta = nn.Parameter(torch.full((history + 1,), uniform))

    @property
    def length(self) -> int:
        """m + 1, the first-stage values it reads."""
        return self.beta.numel()

    def forward(self, f_hat: Tensor, first_stages: List[Tensor]) -> Tensor:
        beta = self.beta.to(f_hat.dtype)
        total = self.alpha.to(f_hat.dtype) * f_hat
        for j, k1 in enumerate(first_stages):
            total = total + beta[j] * k1
        return total


class StateHistory(nn.Module):
    """The public code's DLCL mixes of a stack's states h_0 … h_L (L corrector steps): W and W'
    lower-triangular, initialised to averages (row l: 1/(l + 1)), and LayerNorms LN_l of the
    predictions and LN'_l of the corrector outputs."""

    def __init__(self, steps: int, embed_dim: int) -> None:
        super().__init__()
        average = torch.ones(steps + 1, steps + 1).tril()
        average = average / average.sum(dim=1, keepdim=True)
        self.weight = nn.Parameter(average.clone())
        self.corrected_weight = nn.Parameter(average.clone())
        self.prediction_norms = nn.ModuleList(nn.LayerNorm(embed_dim) for _ in range(steps))
        self.corrected_norms = nn.ModuleList(nn.LayerNorm(embed_dim) for _ in range(steps))
        self.states: List[Tensor] = []

    def start(self, y0: Tensor) -> None:
        self.states = [y0]

    def _mix(self, weight: Tensor) -> Tensor:
        row = weight[len(self.states) - 1, : len(self.states)].to(self.states[0].dtype)
        return sum(w * h for w, h in zip(row, self.states))

    def predicted(self, prediction: Tensor) -> Tensor:
        """Append h_l = LN_l(P) and return the corrector's input Σ_j W_lj h_j."""
        l = len(self.states)
        if l > len(self.prediction_norms):
            raise RuntimeError(f"the stack's state history holds {len(self.prediction_norms)} steps; this is step {l}")
        self.states.append(self.prediction_norms[l - 1](prediction))
        return self._mix(self.weight)

    def corrected(self, correction: Tensor) -> Tensor:
        """Replace h_l by LN'_l(F(x̃)) and return y_l = Σ_j W'_lj h_j."""
        l = len(self.states) - 1
        self.states[l] = self.corrected_norms[l - 1](correction)
        return self._mix(self.corrected_weight)


@dataclass(frozen=True)
class PredictorCorrectorSolver(FixedGridSolver):
    """Fixed-grid predictor–corrector steps (see the module docstring): the tableau and ``combine``
    make the predictor, stage index s is the corrector's evaluation; either ``corrector`` (with a
    shared ``history``, the paper's form) or ``states`` (the public code's form) is given.
    ``starts_history``: this is the stack's first block, whose solve starts the history."""

    corrector: Optional[MultistepCorrector] = None
    history: Optional[FirstStageHistory] = None
    states: Optional[StateHistory] = None
    starts_history: bool = False

    def __post_init__(self) -> None:
        if (self.corrector is None or self.history is None) == (self.states is None):
            raise ValueError("a predictor-corrector solver takes a corrector and its history, or a state history")

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

    def step(
        self,
        field: Union[VectorField, SplitField],
        y: Tensor,
        step: int,
        observer: Optional[SolveObserver] = None,
    ) -> Tensor:
        if isinstance(field, SplitField):
            raise TypeError("a predictor-corrector step integrates the whole field, not a split one")
        if self.states is None:
            earlier = self.history.latest(self.history_length)
            y_next, first_stages = self.multistep_step(field, y, earlier, step, observer)
            self.history.push(first_stages[0])
            return y_next
        ks = self.stage_values(field, y, step, observer)
        x = self.states.predicted(advance(y, self.increment(ks), self.step_size))
        return self.states.corrected(
            self.evaluate(field, self.corrector_time(step), x, step, self.tableau.stages, observer)
        )

    def corrector_time(self, step: int) -> float:
        """t_{n+1} = (n + 1) h, where the corrector evaluates F."""
        return (step + 1) * self.step_size

    def multistep_step(
        self,
        field: VectorField,
        y: Tensor,
        earlier: Sequence[Tensor],
        step: int,
        observer: Optional[SolveObserver] = None,
    ) -> Tuple[Tensor, List[Tensor]]:
        """(y_{n+1}, [k_1^{(n)}, …, k_1^{(n−m)}]) from y_n and ``earlier`` = k_1^{(n−1)}, … (at most
        m, newest first; the oldest value stands in for those before the stack's first step): the
        multistep form's step as a function of the state it carries, reading no shared history."""
        ks = self.stage_values(field, y, step, observer)
        prediction = advance(y, self.increment(ks), self.step_size)
        f_hat = self.evaluate(field, self.corrector_time(step), prediction, step, self.tableau.stages, observer)
        first_stages = [ks[0], *earlier]
        first_stages += [first_stages[-1]] * (self.corrector.length - len(first_stages))
        return advance(y, self.corrector(f_hat, first_stages), self.step_size), first_stages

    def solve(
        self,
        field: Union[VectorField, SplitField],
        y: Tensor,
        observer: Optional[SolveObserver] = None,
        padding_mask: Optional[Tensor] = None,
    ) -> Tensor:
        if self.starts_history:
            if self.states is not None:
                self.states.start(y)
            else:
                self.history.start()
        return super().solve(field, y, observer, padding_mask)
