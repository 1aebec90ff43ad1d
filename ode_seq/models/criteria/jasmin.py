"""JaSMin: a penalty on the local Lipschitz constant of the attention softmax (ODE-ViT).

For one attention row with probabilities sorted as p(1) ≥ p(2) ≥ … ≥ p(S) (p(S+1) = 0),

    g_j = p(j) · (1 − p(j) + p(j+1)),        row penalty  log(g_1 / g_k).

A row that may attend to only n < k keys (causal or padded rows) uses k' = n; a row with one
key has g_1 = 0 and penalty log(ε/ε) = 0 (ε = 1e-12 guards both logarithms). The penalty of one
attention map is the maximum over (non-padding) queries, averaged over heads and sentences; over
a trajectory it is averaged over the field evaluations of the last 85% of the solver steps.
"""

from __future__ import annotations

import math
from typing import Optional, Sequence, Tuple

import torch
from torch import Tensor

from ode_seq.layers.stable.attention import AttentionRecord

EPSILON = 1e-12


def jasmin_rows(probs: Tensor, k: int, available_keys: Optional[Tensor] = None) -> Tensor:
    """log(g_1 / g_k') of every row of ``probs`` (..., S); k' = min(k, available keys)."""
    if k < 2:
        raise ValueError(f"JaSMin needs k >= 2 (k = 1 gives log(g_1/g_1) = 0), got {k}")
    ordered = probs.sort(dim=-1, descending=True).values
    following = torch.cat([ordered[..., 1:], torch.zeros_like(ordered[..., :1])], dim=-1)
    g = ordered * (1.0 - ordered + following)
    if available_keys is None:
        position = torch.full(probs.shape[:-1], min(k, probs.size(-1)), device=probs.device)
    else:
        position = available_keys.clamp(min=1, max=k)
    g_k = g.gather(-1, (position - 1).long().unsqueeze(-1)).squeeze(-1)
    return torch.log(g[..., 0] + EPSILON) - torch.log(g_k + EPSILON)


def jasmin_penalty(
    probs: Tensor,
    k: int,
    query_padding_mask: Optional[Tensor] = None,
    available_keys: Optional[Tensor] = None,
) -> Tensor:
    """Mean over sentences and heads of the maximum row penalty over queries.

    ``probs`` (B, H, T, S); ``query_padding_mask`` (B, T), True at padding queries.
    """
    rows = jasmin_rows(probs.float(), k, available_keys)
    if query_padding_mask is not None:
        rows = rows.masked_fill(query_padding_mask[:, None, :].to(torch.bool), float("-inf"))
    return rows.max(dim=-1).values.mean()


def first_penalised_step(total_steps: int, fraction: float) -> int:
    """Index of the first of the last ⌈fraction · N⌉ steps of an N-step trajectory."""
    if not 0.0 < fraction <= 1.0:
        raise ValueError(f"the JaSMin step fraction must lie in (0, 1], got {fraction}")
    return total_steps - math.ceil(fraction * total_steps)


def trajectory_jasmin(
    evaluations: Sequence[Tuple[int, AttentionRecord]],
    total_steps: int,
    k: int,
    fraction: float = 0.85,
) -> Tensor:
    """Mean JaSMin penalty of the field evaluations (step, record) in the last steps."""
    first = first_penalised_step(total_steps, fraction)
    penalties = [
        jasmin_penalty(r.probs, k, r.query_padding_mask, r.available_keys) for step, r in evaluations if step >= first
    ]
    if not penalties:
        raise ValueError(
            f"no attention probabilities were recorded in steps {first}..{total_steps - 1}: "
            "JaSMin needs stable ODE blocks (--layer-kind stable, as the stable_ode_transformer architectures)"
        )
    return torch.stack(penalties).mean()
