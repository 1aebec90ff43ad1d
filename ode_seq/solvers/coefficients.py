"""Learned weights of a step, modules its block owns: the output weights w of a Runge–Kutta step
(fixed, gated per token, or free parameters) and a multistep corrector's α, β_j.

Every mode returns Σ_i w_i k_i for the stage values k_1 … k_s of one step (a fixed-grid
solver's ``combine``; the same module weights every step of a block):

- ``fixed``: w = b, the tableau's weights.
- ``learned``: a per-token gate over the stages, w = softmax([W·[k_1; …; k_s] + β, 0]),
  W ∈ R^{(s-1)×sd} Xavier-initialised, β = 0. For s = 2 this is exactly the paper's RK2 gate
  g = sigmoid(W·[k_1; k_2] + β), y' = y + g·k_1 + (1 − g)·k_2. One gate per block.
- ``learned-shared``: the same gate, one module shared by every block of a stack (public code).
- ``free``: free scalars w initialised to the tableau's b.
- ``free-ones``: free scalars w initialised to 1 (the paper's "initialization" ablation).
- ``ema``: PCformer's exponential-moving-average weights (Li et al., 2024),
  w_i = β(1−β)^{s−i} for i = 1 … s, one trainable β per block initialised to 0.5 (s = 2: ¼, ½;
  s = 4: 1/16, 1/8, ¼, ½). They sum to 1 − (1−β)^s, not 1: the step is not a consistent
  Runge–Kutta step unless β = 1 (then only the last stage counts).

The solvers take these modules as functions (``combine``, ``corrector``); the block registers them.
"""

from __future__ import annotations

from typing import Dict, List, Sequence

import torch
from torch import Tensor, nn

from .fixed_grid import weighted_sum
from .tableaus import ButcherTableau

COEFFICIENT_MODES = ("fixed", "learned", "learned-shared", "free", "free-ones", "ema")
GATED_MODES = ("learned", "learned-shared")


class FixedWeights(nn.Module):
    """Σ_i b_i k_i with the tableau's b."""

    def __init__(self, tableau: ButcherTableau) -> None:
        super().__init__()
        self.b = tableau.b

    def forward(self, ks: Sequence[Tensor]) -> Tensor:
        return weighted_sum(self.b, ks)

    def weights(self, ks: Sequence[Tensor]) -> Tensor:
        return ks[0].new_tensor(self.b)


class FreeWeights(nn.Module):
    """Σ_i w_i k_i with trainable scalars w."""

    def __init__(self, initial: Sequence[float]) -> None:
        super().__init__()
        self.initial = tuple(float(w) for w in initial)
        self.w = nn.Parameter(self.initial_values()["w"])

    def initial_values(self) -> Dict[str, Tensor]:
        """Each parameter's value at construction (to set again where a loader skipped it)."""
        return {"w": torch.tensor(self.initial, dtype=torch.float32)}

    def forward(self, ks: Sequence[Tensor]) -> Tensor:
        return sum(w * k for w, k in zip(self.w.to(ks[0].dtype), ks))

    def weights(self, ks: Sequence[Tensor]) -> Tensor:
        return self.w.detach()


class EMAWeights(nn.Module):
    """Σ_i w_i k_i with w_i = β(1−β)^{s−i}, β trainable (initialised to 0.5)."""

    def __init__(self, stages: int, beta: float = 0.5) -> None:
        super().__init__()
        self.stages = stages
        self.initial_beta = beta
        self.beta = nn.Parameter(self.initial_values()["beta"])

    def initial_values(self) -> Dict[str, Tensor]:
        """Each parameter's value at construction (to set again where a loader skipped it)."""
        return {"beta": torch.tensor(self.initial_beta)}

    def weights(self, ks: Sequence[Tensor]) -> Tensor:
        """w (s,): β(1−β)^{s−i} for i = 1 … s. (The exponents are made here, not kept in a
        buffer, so a model materialised from the meta device, as transformers loads, has them.)"""
        powers = torch.arange(self.stages - 1, -1, -1, dtype=self.beta.dtype, device=self.beta.device)
        return self.beta * (1 - self.beta) ** powers

    def forward(self, ks: Sequence[Tensor]) -> Tensor:
        w = self.weights(ks).to(ks[0].dtype)
        return sum(w[i] * k for i, k in enumerate(ks))


class StageGate(nn.Module):
    """Per-token softmax gate over s stages with the last logit fixed at 0 (sigmoid when s = 2)."""

    def __init__(self, stages: int, embed_dim: int) -> None:
        super().__init__()
        if stages < 2:
            raise ValueError("a stage gate needs a method with at least 2 stages")
        self.proj = nn.Linear(stages * embed_dim, stages - 1)
        nn.init.xavier_uniform_(self.proj.weight)
        nn.init.zeros_(self.proj.bias)

    def weights(self, ks: Sequence[Tensor]) -> Tensor:
        """w (…, s): the gate values of each token (W·[k_1; …; k_s] as Σ_i W_i k_i, no concat)."""
        d = ks[0].size(-1)
        weight = self.proj.weight
        logits = self.proj.bias + sum(
            torch.nn.functional.linear(k, weight[:, i * d : (i + 1) * d]) for i, k in enumerate(ks)
        )
        logits = torch.cat([logits, torch.zeros_like(logits[..., :1])], dim=-1)
        return torch.softmax(logits.float(), dim=-1).type_as(logits)

    def forward(self, ks: Sequence[Tensor]) -> Tensor:
        w = self.weights(ks)
        return sum(w[..., i : i + 1] * k for i, k in enumerate(ks))


class MultistepCorrector(nn.Module):
    """PCformer's multistep correction α F̂ + Σ_{j=0}^{m} β_j k_1^{(n−j)} (:mod:`.predictor_corrector`),
    one α and m + 1 β_j per block, all initialised to 1/(m + 2): the public code starts its
    corrector mix (``weight_c``) as a uniform average over its terms, here applied to the paper's."""

    def __init__(self, history: int) -> None:
        super().__init__()
        if history < 0:
            raise ValueError(f"the corrector's history length m must be >= 0, got {history}")
        self.history = history
        initial = self.initial_values()
        self.alpha = nn.Parameter(initial["alpha"])
        self.beta = nn.Parameter(initial["beta"])

    def initial_values(self) -> Dict[str, Tensor]:
        """Each parameter's value at construction (to set again where a loader skipped it)."""
        uniform = 1.0 / (self.history + 2)
        return {"alpha": torch.tensor(uniform), "beta": torch.full((self.history + 1,), uniform)}

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


def build_combiner(mode: str, tableau: ButcherTableau, embed_dim: int) -> nn.Module:
    """A new module computing Σ_i w_i k_i for ``mode`` (see the module docstring); for
    ``learned-shared`` the caller gives one such module to every block of a stack."""
    if mode == "fixed":
        return FixedWeights(tableau)
    if mode == "free":
        return FreeWeights(tableau.b)
    if mode == "free-ones":
        return FreeWeights([1.0] * tableau.stages)
    if mode == "ema":
        return EMAWeights(tableau.stages)
    if mode in GATED_MODES:
        return StageGate(tableau.stages, embed_dim)
    raise ValueError(f"unknown coefficient mode {mode!r}; choose one of: {', '.join(COEFFICIENT_MODES)}")
