"""Runge–Kutta blocks: one Transformer layer's parameters reused at every stage.

    y' = y + Σ_i w_i k_i,    k_i = F(y + Σ_{j<i} a_ij k_j)     (step size h = 1 per block)

A block *is* fairseq's layer (a subclass of it, see :mod:`ode_seq.fields`) whose forward takes
one Runge–Kutta step instead of one residual update. It keeps the layer's call signature and
parameter names, so fairseq's encoder/decoder loops run it unchanged and a vanilla pre-norm
checkpoint loads into an ODE model (only the coefficient parameters are new).
"""
from __future__ import annotations

from typing import Any, List, Optional

import torch
from fairseq.incremental_decoding_utils import with_incremental_state
from torch import Tensor, nn

from .fields import DecoderLayerField, EncoderLayerField
from .layer_history import LayerHistory
from .stage_state import IncrementalState, reorder_stage_states, stage_state
from .stepper import VectorField, rk_step
from .tableaus import ButcherTableau


class _RungeKuttaStep:
    """Mixin: the method (tableau), output weights (combiner) and stage checkpointing."""

    tableau: ButcherTableau
    checkpoint_stages: bool

    def _init_step(
        self, tableau: ButcherTableau, combiner: nn.Module, checkpoint_stages: bool
    ) -> None:
        self.tableau = tableau
        self.combiner = combiner
        self.checkpoint_stages = checkpoint_stages

    def step(self, field: VectorField, y: Tensor) -> Tensor:
        return rk_step(
            field,
            y,
            self.tableau,
            combine=self.combiner,
            checkpoint_stages=self.checkpoint_stages and self.training,
        )

    def extra_repr(self) -> str:
        return f"method={self.tableau.name}, checkpoint_stages={self.checkpoint_stages}"


class EncoderODEBlock(_RungeKuttaStep, EncoderLayerField):
    """Encoder block; called like fairseq's encoder layer: (x, encoder_padding_mask, attn_mask)."""

    def __init__(
        self,
        cfg,
        tableau: ButcherTableau,
        combiner: nn.Module,
        field_form: str = "residual-branch",
        relative_positions: int = 0,
        checkpoint_stages: bool = False,
    ) -> None:
        super().__init__(cfg, field_form, relative_positions)
        self._init_step(tableau, combiner, checkpoint_stages)

    def forward(
        self,
        x: Tensor,
        encoder_padding_mask: Optional[Tensor] = None,
        attn_mask: Optional[Tensor] = None,
    ) -> Tensor:
        return self.step(lambda z, _: self.field(z, encoder_padding_mask, attn_mask), x)


@with_incremental_state
class DecoderODEBlock(_RungeKuttaStep, DecoderLayerField):
    """Decoder block with one self-attention cache per stage; returns (x, attention, None).

    The cross-attention it returns (for alignments) is the average over stages.
    """

    def __init__(
        self,
        cfg,
        tableau: ButcherTableau,
        combiner: nn.Module,
        field_form: str = "residual-branch",
        relative_positions: int = 0,
        checkpoint_stages: bool = False,
        no_encoder_attn: bool = False,
    ) -> None:
        super().__init__(cfg, field_form, no_encoder_attn, relative_positions)
        self._init_step(tableau, combiner, checkpoint_stages)

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

        def field(z: Tensor, stage: int) -> Tensor:
            state = None
            if incremental_state is not None:
                state = stage_state(self, incremental_state, stage, self.encoder_attn)
            k, attn = self.field(
                z,
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

        y = self.step(field, x)
        attn = torch.stack(attentions).mean(dim=0) if attentions else None
        return y, attn, None

    def reorder_incremental_state(
        self, incremental_state: IncrementalState, new_order: Tensor
    ) -> None:
        reorder_stage_states(
            self,
            incremental_state,
            self.tableau.stages,
            self.self_attn,
            self.encoder_attn,
            new_order,
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
