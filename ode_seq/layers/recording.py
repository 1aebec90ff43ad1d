"""Record what the Runge–Kutta blocks of a stack do in one forward pass, as observers of their solves.

For a block integrating [0, T] with N steps of size h = T/N, the state after step n is
y_n = y_{n−1} + h Σ_i w_i k_i. Stage 1 of an explicit method evaluates F at y_n itself, so
y_1 … y_{N−1} are the stage-1 inputs of steps 2 … N and y_N is what the solve returns. Blocks
run one after another, so block b's states lie at times Σ_{b'<b} T_b' + n·h. Stable blocks also
report their self-attention probabilities at every field evaluation, with the solver step.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any, Iterator, List, Tuple

from torch import Tensor, nn

from ode_seq.solvers import AdaptiveSolver, SolveObserver

from .blocks import ode_blocks
from .stable.attention import AttentionRecord, StableMultiheadAttention


@dataclass
class SolverRecord:
    """States after every solver step of a stack (time order) and self-attention records."""

    states: List[Tensor] = field(default_factory=list)
    times: List[float] = field(default_factory=list)
    attention: List[Tuple[int, AttentionRecord]] = field(default_factory=list)
    total_steps: int = 0
    clock: float = 0.0


class _StepRecorder(SolveObserver):
    """Appends one block's step states (and its attention records) to the stack's record."""

    def __init__(self, record: SolverRecord) -> None:
        self.record = record
        self.pending: List[AttentionRecord] = []

    def __call__(self, attention: AttentionRecord) -> None:
        self.pending.append(attention)

    def solve_started(self, solver: Any, y: Tensor) -> None:
        self.solver, self.start, self.first_step = solver, self.record.clock, self.record.total_steps

    def stage_evaluated(self, step: int, stage: int, t: float, z: Tensor, k: Tensor) -> None:
        if stage == 0 and step > 0:
            self.record.states.append(z)
            self.record.times.append(self.start + step * self.solver.step_size)
        self.record.attention.extend((self.first_step + step, a) for a in self.pending)
        self.pending = []

    def solve_finished(self, y: Tensor) -> None:
        self.record.states.append(y)
        self.record.times.append(self.start + self.solver.interval)
        self.record.clock += self.solver.interval
        self.record.total_steps += self.solver.steps


def _check_recordable(block: nn.Module) -> None:
    name = block.spec.name
    if hasattr(block, "precheckpoint_forward"):
        raise ValueError(
            f"{name} runs under --checkpoint-activations, which computes its forward pass "
            "without gradients, so recorded states and attention would carry none; use "
            "--ode-checkpoint-stages instead (it keeps gradients exact)"
        )
    if isinstance(block.solver, AdaptiveSolver):
        raise ValueError(
            f"{name} solves adaptively ({block.solver.method}); recording solver steps needs a "
            "fixed grid: use a fixed-grid method such as euler or rk4"
        )


@contextlib.contextmanager
def record_solver_steps(stack: nn.Module) -> Iterator[SolverRecord]:
    """Within the block, every forward of ``stack`` appends to the yielded record.

    Raises ValueError for adaptive blocks, which have no fixed grid of steps, and for blocks
    under fairseq's --checkpoint-activations, whose forward runs without gradients.
    """
    blocks = ode_blocks(stack)
    for block in blocks:
        _check_recordable(block)
    record = SolverRecord()
    handles = []
    try:
        for block in blocks:
            recorder = _StepRecorder(record)
            handles.append(block.register_observer(recorder))
            if isinstance(block.self_attn, StableMultiheadAttention):
                handles.append(block.self_attn.register_probability_hook(recorder))
        yield record
    finally:
        for handle in handles:
            handle.remove()
