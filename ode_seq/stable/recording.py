"""Record what the Runge–Kutta blocks of a stack do in one forward pass, without changing them.

For a block integrating [0, T] with N steps of size h = T/N, the state after step n is
y_n = y_{n−1} + h Σ_i w_i k_i. Stage 1 of an explicit method evaluates F at y_n itself, so
y_1 … y_{N−1} are the stage-1 inputs of steps 2 … N and y_N is what the block returns. The
recorder wraps each block's ``integrate`` on the instance and the field it is given; blocks run
one after another, so block b's states lie at times Σ_{b'<b} T_b' + n·h. Stable blocks also
report their self-attention probabilities at every field evaluation, with the solver step.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Callable, Iterator, List, Tuple

from torch import Tensor, nn

from ..blocks import DecoderODEBlock, EncoderODEBlock
from .attention import AttentionRecord, StableMultiheadAttention


@dataclass
class SolverRecord:
    """States after every solver step of a stack (time order) and self-attention records."""

    states: List[Tensor] = field(default_factory=list)
    times: List[float] = field(default_factory=list)
    attention: List[Tuple[int, AttentionRecord]] = field(default_factory=list)
    total_steps: int = 0
    clock: float = 0.0
    active: bool = True


def ode_blocks(stack: nn.Module) -> List[nn.Module]:
    """The Runge–Kutta blocks of an encoder or decoder in execution order."""
    return [m for m in stack.modules() if isinstance(m, (EncoderODEBlock, DecoderODEBlock))]


def _recording_integrate(block: nn.Module, original: Callable, record: SolverRecord) -> Callable:
    attention = block.self_attn if isinstance(block.self_attn, StableMultiheadAttention) else None

    def integrate(step_field: Callable[..., Tensor], y: Tensor) -> Tensor:
        if not record.active:
            return original(step_field, y)
        plan = block.integration
        start, first_step, h = record.clock, record.total_steps, plan.interval / plan.steps

        def recorded(z: Tensor, stage: int, step: int) -> Tensor:
            if not record.active:
                return step_field(z, stage, step=step)
            if stage == 0 and step > 0:
                record.states.append(z)
                record.times.append(start + step * h)
            if attention is None:
                return step_field(z, stage, step=step)
            attention.recorded = []
            try:
                k = step_field(z, stage, step=step)
                record.attention.extend((first_step + step, r) for r in attention.recorded)
            finally:
                attention.recorded = None
            return k

        y = original(recorded, y)
        record.states.append(y)
        record.times.append(start + plan.interval)
        record.clock += plan.interval
        record.total_steps += plan.steps
        return y

    return integrate


@contextlib.contextmanager
def record_solver_steps(stack: nn.Module) -> Iterator[SolverRecord]:
    """Within the block, every forward of ``stack`` appends to the yielded record.

    Raises ValueError for adaptive blocks, which have no fixed grid of steps, and for blocks
    under fairseq's --checkpoint-activations, whose forward runs without gradients (the recorded
    states would carry none).
    """
    blocks = ode_blocks(stack)
    for block in blocks:
        if hasattr(block, "precheckpoint_forward"):
            raise ValueError(
                f"{block.name} runs under --checkpoint-activations, which computes its forward "
                "pass without gradients, so recorded states and attention would carry none; use "
                "--ode-checkpoint-stages instead (it keeps gradients exact)"
            )
        if block.integration.adaptive is not None:
            raise ValueError(
                f"{block.name} solves adaptively ({block.integration.adaptive.method}); recording "
                "solver steps needs a fixed grid: use a fixed-grid method such as euler or rk4"
            )
    record = SolverRecord()
    for block in blocks:
        block.integrate = _recording_integrate(block, block.integrate, record)
    try:
        yield record
    finally:
        record.active = False
        for block in blocks:
            del block.integrate
