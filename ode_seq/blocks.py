"""Runge–Kutta blocks: one Transformer layer's parameters reused at every stage and step.

    y_{n+1} = y_n + h Σ_i w_i k_i,    k_i = F(y_n + h Σ_{j<i} a_ij k_j),    n = 0 … N−1

A block integrates dy/dt = F(y) over [0, T] with N steps of size h = T/N; the ODE Transformer
block is T = N = 1, a weight-shared group of k layers is T = k. Encoder blocks may instead
solve adaptively (:mod:`ode_seq.adaptive`).

A block *is* fairseq's layer (a subclass of it, see :mod:`ode_seq.fields`) whose forward takes
one Runge–Kutta step instead of one residual update. It keeps the layer's call signature and
parameter names, so fairseq's encoder/decoder loops run it unchanged and a vanilla pre-norm
checkpoint loads into an ODE model (only the coefficient parameters are new).
"""
from __future__ import annotations

import functools
import logging
from dataclasses import dataclass
from typing import Any, Callable, List, Optional

import torch
from fairseq.incremental_decoding_utils import with_incremental_state
from fairseq.logging import metrics
from torch import Tensor, nn

from .adaptive import AdaptiveSolver
from .fields import DecoderLayerField, EncoderLayerField
from .layer_history import LayerHistory
from .stage_state import IncrementalState, reorder_stage_states, stage_state
from .stepper import rk_step
from .tableaus import ButcherTableau

StepField = Callable[..., Tensor]  # F(z, stage, step=n)

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Integration:
    """How a block integrates: method, output weights, grid, checkpointing."""

    tableau: ButcherTableau
    steps: int = 1
    interval: float = 1.0
    checkpoint_stages: bool = False
    adaptive: Optional[AdaptiveSolver] = None
    check_finite: bool = False

    @property
    def method(self) -> str:
        return self.adaptive.method if self.adaptive else self.tableau.name


class _RungeKuttaStep:
    """Mixin: integrates the layer's field with the block's ``Integration`` and combiner."""

    integration: Integration
    name: str = "ODE block"

    def _init_step(self, integration: Integration, combiner: nn.Module) -> None:
        self.integration = integration
        self.combiner = combiner

    def stage_field(self, z: Tensor, stage: int, step: int, *args: Any, **kwargs: Any):
        """F at stage ``stage`` of step ``step``: the layer's field (time-independent here)."""
        return self.field(z, *args, **kwargs)

    def _checked(self, field: StepField) -> StepField:
        """``field`` that reports a non-finite stage output with block, step, stage and method.

        float32/float64: raises FloatingPointError. float16/bfloat16: logs a warning and lets
        fairseq's loss scaler handle the overflow (a scale step, not a crash).
        """

        def checked(z: Tensor, stage: int, step: int) -> Tensor:
            k = field(z, stage, step=step)
            if not torch.isfinite(k).all():
                message = (
                    f"non-finite value in {self.name}, step {step}, stage {stage + 1} of method "
                    f"{self.integration.method} (dtype {k.dtype}): the layer's output "
                    f"k_{stage + 1} holds inf/nan"
                )
                if k.dtype in (torch.float16, torch.bfloat16):
                    logger.warning(message)
                else:
                    raise FloatingPointError(message)
            return k

        return checked

    @property
    def tableau(self) -> ButcherTableau:
        return self.integration.tableau

    def integrate(self, field: StepField, y: Tensor) -> Tensor:
        """N fixed steps of size T/N; ``field(z, stage, step=n)``."""
        plan = self.integration
        if plan.check_finite:
            field = self._checked(field)
        h = plan.interval / plan.steps
        for n in range(plan.steps):
            y = rk_step(
                functools.partial(field, step=n),
                y,
                plan.tableau,
                h,
                combine=self.combiner,
                checkpoint_stages=plan.checkpoint_stages and self.training,
            )
        return y

    def extra_repr(self) -> str:
        plan = self.integration
        return f"method={plan.method}, steps={plan.steps}, interval={plan.interval}"


class EncoderODEBlock(_RungeKuttaStep, EncoderLayerField):
    """Encoder block; called like fairseq's encoder layer: (x, encoder_padding_mask, attn_mask)."""

    def __init__(
        self,
        cfg,
        integration: Integration,
        combiner: nn.Module,
        field_form: str = "residual-branch",
        relative_positions: int = 0,
    ) -> None:
        super().__init__(cfg, field_form, relative_positions)
        self._init_step(integration, combiner)

    def forward(
        self,
        x: Tensor,
        encoder_padding_mask: Optional[Tensor] = None,
        attn_mask: Optional[Tensor] = None,
    ) -> Tensor:
        def field(z: Tensor, stage: int, step: int) -> Tensor:
            return self.stage_field(z, stage, step, encoder_padding_mask, attn_mask)

        adaptive = self.integration.adaptive
        if adaptive is None:
            return self.integrate(field, x)
        if self.integration.check_finite:
            field = self._checked(field)
        y, evaluations = adaptive.solve(lambda z: field(z, 0, 0), x, encoder_padding_mask)
        self.nfe = evaluations
        metrics.log_scalar("encoder_nfe", evaluations, weight=1, round=1)
        return y


@with_incremental_state
class DecoderODEBlock(_RungeKuttaStep, DecoderLayerField):
    """Decoder block with one self-attention cache per stage; returns (x, attention, None).

    The cross-attention it returns (for alignments) is the average over stages.
    ``share_cross_attention``: whether all stages reuse stage (0, 0)'s cross-attention K/V
    (true when the weights do not depend on the stage).
    """

    share_cross_attention = True

    def __init__(
        self,
        cfg,
        integration: Integration,
        combiner: nn.Module,
        field_form: str = "residual-branch",
        relative_positions: int = 0,
        no_encoder_attn: bool = False,
    ) -> None:
        if integration.adaptive is not None:
            raise ValueError(
                "adaptive solvers cannot run a causal decoder: their batch-wide step sizes see "
                "future positions and incremental decoding needs a fixed grid; use a fixed-grid "
                "--decoder-ode-method (e.g. rk4) with --decoder-ode-steps"
            )
        super().__init__(cfg, field_form, no_encoder_attn, relative_positions)
        self._init_step(integration, combiner)

    def forward(
        self,
        x: Tensor,
        encoder_out: Optional[Tensor] = None,
        encoder_padding_mask: Optional[Tensor] = None,
        incremental_state: Optional[IncrementalState] = None,
        prev_self_attn_state: Optional[List[Tensor]] = None,
        prev_attn_state: Optional[List[Tensor]] = None,
        self_attn_mask: Optional[Tensor] = None,
        self_attn_padding_mask: Optional[Tensor] = None,
        need_attn: bool = False,
        need_head_weights: bool = False,
    ):
        if prev_self_attn_state is not None or prev_attn_state is not None:
            raise ValueError(
                "ODE decoder blocks keep one cache per stage and cannot take prev_*_attn_state"
            )
        attentions: List[Tensor] = []

        def field(z: Tensor, stage: int, step: int) -> Tensor:
            state = None
            if incremental_state is not None:
                shared = self.encoder_attn if self.share_cross_attention else None
                state = stage_state(self, incremental_state, step, stage, shared)
            k, attn = self.stage_field(
                z,
                stage,
                step,
                encoder_out=encoder_out,
                encoder_padding_mask=encoder_padding_mask,
                incremental_state=state,
                self_attn_mask=self_attn_mask,
                self_attn_padding_mask=self_attn_padding_mask,
                need_attn=need_attn,
                need_head_weights=need_head_weights,
            )
            if attn is not None:
                attentions.append(attn)
            return k

        y = self.integrate(field, x)
        attn = torch.stack(attentions).mean(dim=0) if attentions else None
        return y, attn, None

    def reorder_incremental_state(
        self, incremental_state: IncrementalState, new_order: Tensor
    ) -> None:
        reorder_stage_states(
            self,
            incremental_state,
            self.integration.steps,
            self.tableau.stages,
            self.self_attn,
            self.encoder_attn,
            new_order,
            self.share_cross_attention,
        )


class HistoryBlock(nn.Module):
    """A block whose input is the DLCL history mix x_l and whose output joins the history.

    The history module belongs to the stack (registered there once); ``first`` starts it with
    the embedding, ``last`` returns the final mix x_L instead of the block output.
    """

    def __init__(self, block: nn.Module, history: LayerHistory, first: bool, last: bool) -> None:
        super().__init__()
        self.block = block
        self.__dict__["history"] = history
        self.first = first
        self.last = last

    def forward(self, x: Tensor, *args: Any, **kwargs: Any):
        history: LayerHistory = self.__dict__["history"]
        if self.first:
            history.start(x)
        else:
            history.push(x)
        out = self.block(history.read(), *args, **kwargs)
        if not self.last:
            return out
        if not isinstance(out, tuple):
            history.push(out)
            return history.read()
        history.push(out[0])
        return (history.read(),) + out[1:]
