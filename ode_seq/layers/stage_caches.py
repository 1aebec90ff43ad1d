"""Per-(block, step, stage) incremental state for Runge–Kutta decoder blocks.

Stage i of step n of a decoder block at position t sees its own stage input at positions ≤ t,
so each (step, stage) keeps its own self-attention key/value cache: ``incremental_state`` holds
one nested dictionary per (step, stage) under the block's key. Cross-attention keys/values
depend only on the encoder output; (0, 0) computes them and every other stage reuses them.
"""

from __future__ import annotations

from typing import Dict, Optional

from fairseq.incremental_decoding_utils import FairseqIncrementalState
from fairseq.modules.multihead_attention import MultiheadAttention
from torch import Tensor

IncrementalState = Dict[str, Dict[str, Optional[Tensor]]]


def stage_key(step: int, stage: int) -> str:
    return f"step{step}.stage{stage}"


def stage_state(
    owner: FairseqIncrementalState,
    incremental_state: IncrementalState,
    step: int,
    stage: int,
    cross_attention: Optional[MultiheadAttention],
) -> IncrementalState:
    """The nested state of (step, stage), created on first use, sharing (0, 0)'s cross-attn K/V."""
    key = stage_key(step, stage)
    state = owner.get_incremental_state(incremental_state, key)
    if state is None:
        state = {}
        owner.set_incremental_state(incremental_state, key, state)
    if (step, stage) != (0, 0) and cross_attention is not None:
        shared = cross_attention.get_incremental_state(stage_state(owner, incremental_state, 0, 0, None), "attn_state")
        if shared is not None:
            cross_attention.set_incremental_state(state, "attn_state", shared)
    return state


def reorder_stage_states(
    owner: FairseqIncrementalState,
    incremental_state: IncrementalState,
    steps: int,
    stages: int,
    self_attention: MultiheadAttention,
    cross_attention: Optional[MultiheadAttention],
    new_order: Tensor,
    share_cross_attention: bool = True,
) -> None:
    """Reorder every (step, stage) self-attention cache and the cross-attention caches (once
    when all stages share stage (0, 0)'s, else each)."""
    for step in range(steps):
        for stage in range(stages):
            state = owner.get_incremental_state(incremental_state, stage_key(step, stage))
            if state is None:
                continue
            self_attention.reorder_incremental_state(state, new_order)
            if cross_attention is None:
                continue
            if (step, stage) == (0, 0) or not share_cross_attention:
                cross_attention.reorder_incremental_state(state, new_order)
            else:
                stage_state(owner, incremental_state, step, stage, cross_attention)
