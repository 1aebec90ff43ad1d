"""The trajectory loss of teacher-trajectory distillation (ODE-ViT's plug & play teacher–student).

A trained discrete pre-norm Transformer is the teacher. Its layer outputs h^0 (embeddings),
h^1 … h^L are read as samples of an ODE solution at control times 0 < t_1 < … < t_L = T, where T
is the student stack's integration interval (its number of layers):

    uniform:   t_ℓ = ℓ·T/L
    distance:  t_ℓ = T·Σ_{m≤ℓ} softmax(d/τ)_m,   d_m = mean over tokens of ‖h^m − h^{m−1}‖₂

so more solver steps go where consecutive teacher layers differ most (τ = 30 in ODE-ViT; τ → ∞
is uniform). The student's state X(t_ℓ) is its state after the solver step nearest t_ℓ, and

    L_traj = (1/L) Σ_ℓ  Σ_i ‖X_i(t_ℓ) − h_i^ℓ‖²  /  Σ_i ‖h_i^ℓ‖²        (i: non-padding tokens)

is the per-layer-normalised MSE.
"""

from __future__ import annotations

from typing import List, Optional, Sequence, Tuple

import torch
from torch import Tensor

CONTROL_TIME_MODES = ("uniform", "distance")


def control_times(distances: Tensor, total_time: float, mode: str = "distance", temperature: float = 30.0) -> Tensor:
    """t_1 … t_L on [0, T] for L teacher layers with mean layer-to-layer distances d_1 … d_L."""
    layers = distances.numel()
    if mode == "uniform":
        weights = torch.full((layers,), 1.0 / layers, dtype=torch.float64)
    elif mode == "distance":
        if temperature <= 0:
            raise ValueError(f"the control-time temperature must be positive, got {temperature}")
        weights = torch.softmax(distances.double() / temperature, dim=0)
    else:
        raise ValueError(f"control times {mode!r} are not valid; choose one of: {', '.join(CONTROL_TIME_MODES)}")
    times = total_time * torch.cumsum(weights, dim=0)
    times[-1] = total_time
    return times


def nearest_steps(step_times: Sequence[float], times: Tensor) -> List[int]:
    """For each control time the index of the nearest step time (the earlier one on ties)."""
    grid = torch.tensor(list(step_times), dtype=torch.float64)
    return [int(torch.argmin((grid - t).abs())) for t in times.double()]


def layer_distance_sums(states: Sequence[Tensor], keep: Tensor) -> Tuple[Tensor, int]:
    """(Σ_i ‖h_i^m − h_i^{m−1}‖ for m = 1 … L, number of tokens i); states (T, B, C), keep (T, B)."""
    sums = torch.stack([((b.float() - a.float()).norm(dim=-1) * keep).sum() for a, b in zip(states[:-1], states[1:])])
    return sums, int(keep.sum())


class DistanceMean:
    """Running token-weighted mean of the teacher's layer-to-layer distances d_1 … d_L."""

    def __init__(self) -> None:
        self.sums: Optional[Tensor] = None
        self.tokens = 0

    def update(self, sums: Tensor, tokens: int) -> None:
        sums = sums.detach().double().cpu()
        self.sums = sums if self.sums is None else self.sums + sums
        self.tokens += tokens

    def mean(self, fallback: Tuple[Tensor, int]) -> Tensor:
        """The running mean; ``fallback`` (sums, tokens) when nothing was accumulated yet."""
        if self.sums is None or self.tokens == 0:
            sums, tokens = fallback
            return sums.detach().double().cpu() / max(tokens, 1)
        return self.sums / self.tokens


def relative_squared_error(x: Tensor, h: Tensor, keep: Tensor) -> Tensor:
    """Σ_i ‖x_i − h_i‖² / Σ_i ‖h_i‖² over the tokens i where ``keep`` (T, B) is true."""
    mask = keep.unsqueeze(-1).float()
    h = h.float()
    error = ((x.float() - h).pow(2) * mask).sum()
    scale = (h.pow(2) * mask).sum().clamp_min(1e-12)
    return error / scale


def trajectory_loss(
    student_states: Sequence[Tensor],
    step_times: Sequence[float],
    teacher_states: Sequence[Tensor],
    keep: Tensor,
    times: Tensor,
) -> Tensor:
    """(1/L) Σ_ℓ relative squared error of X(t_ℓ) (nearest step) against h^ℓ, ℓ = 1 … L."""
    steps = nearest_steps(step_times, times)
    errors = [
        relative_squared_error(student_states[s], teacher_states[layer + 1], keep) for layer, s in enumerate(steps)
    ]
    return torch.stack(errors).mean()


def curriculum_weight(update: int, start: int, warmup: int, final: float) -> float:
    """0 before update ``start``, then a linear ramp over ``warmup`` updates up to ``final``."""
    if update < start:
        return 0.0
    if warmup <= 0:
        return final
    return final * min(1.0, (update - start + 1) / warmup)
