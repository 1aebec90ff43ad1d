"""Weights as functions of depth (Tong et al., ICLR 2025): θ(τ) for every parameter of a layer.

    φ(τ) = [τ, sin(1000 τ ω_k), cos(1000 τ ω_k)]_{k<s},  ω_k = exp(−ln(10⁴)·k/s)
    e(τ) = Lin2(SiLU(Lin1(φ(τ)))) ∈ R^{d_e}            (Lin2 zero-initialised: e ≡ 0 at init)

Two forms of θ_p(τ) for a parameter p with n_p entries:

- ``paper``: θ_p(τ) = c_p + A_p e(τ), A_p ∈ R^{n_p × d_e}: (d_e + 1)·n_p parameters.
- ``low-rank`` (parameter budget): matrices W(τ) = W0 + U diag(B e(τ)) Vᵀ with U ∈ R^{out×r},
  V ∈ R^{in×r}, B ∈ R^{r×d_e} (out·in + r·(out + in + d_e) parameters); vectors as in ``paper``.

c_p / W0 start from the layer's own initialisation, so with e ≡ 0 the model starts autonomous
(the same weights at every τ).
"""
from __future__ import annotations

import math
from typing import Dict, Tuple

import torch
from torch import Tensor, nn

TIME_FORMS = ("paper", "low-rank")


def time_features(tau: float, size: int, device=None) -> Tensor:
    """φ(τ) ∈ R^{2·size + 1}."""
    omega = torch.exp(-math.log(1e4) * torch.arange(size, dtype=torch.float32, device=device) / size)
    angle = 1000.0 * tau * omega
    return torch.cat([torch.tensor([tau], device=device), torch.sin(angle), torch.cos(angle)])


class TimeEmbedding(nn.Module):
    """e(τ) = Lin2(SiLU(Lin1(φ(τ)))) with Lin2 zero-initialised."""

    def __init__(self, features: int, hidden: int, dim: int) -> None:
        super().__init__()
        self.features = features
        self.lin1 = nn.Linear(2 * features + 1, hidden)
        self.lin2 = nn.Linear(hidden, dim)
        nn.init.zeros_(self.lin2.weight)
        nn.init.zeros_(self.lin2.bias)

    def forward(self, tau: float) -> Tensor:
        phi = time_features(tau, self.features, self.lin1.weight.device).to(self.lin1.weight.dtype)
        return self.lin2(torch.nn.functional.silu(self.lin1(phi)))


class _PaperParameter(nn.Module):
    """θ(τ) = c + A e(τ)."""

    def __init__(self, initial: Tensor, dim: int) -> None:
        super().__init__()
        self.shape = tuple(initial.shape)
        self.c = nn.Parameter(initial.detach().clone())
        self.A = nn.Parameter(torch.randn(initial.numel(), dim) * (0.02 / math.sqrt(dim)))

    def forward(self, e: Tensor) -> Tensor:
        return self.c + (self.A @ e).view(self.shape)


class _LowRankMatrix(nn.Module):
    """W(τ) = W0 + U diag(B e(τ)) Vᵀ."""

    def __init__(self, initial: Tensor, dim: int, rank: int) -> None:
        super().__init__()
        out_features, in_features = initial.shape
        self.W0 = nn.Parameter(initial.detach().clone())
        self.U = nn.Parameter(torch.randn(out_features, rank) / math.sqrt(out_features))
        self.V = nn.Parameter(torch.randn(in_features, rank) / math.sqrt(in_features))
        self.B = nn.Parameter(torch.randn(rank, dim) * (0.02 / math.sqrt(dim)))

    def forward(self, e: Tensor) -> Tensor:
        return self.W0 + (self.U * (self.B @ e)) @ self.V.t()


class TimeDependentWeights(nn.Module):
    """θ(τ) for every parameter of ``template`` (a module whose own parameters stay unused);
    ``form`` is one of ``TIME_FORMS``."""

    def __init__(self, template: nn.Module, dim: int, form: str = "paper", rank: int = 8) -> None:
        super().__init__()
        self.names = [name for name, _ in template.named_parameters()]
        self.params = nn.ModuleDict()
        for name, p in template.named_parameters():
            key = name.replace(".", "__")
            if form == "low-rank" and p.dim() == 2:
                self.params[key] = _LowRankMatrix(p, dim, rank)
            else:
                self.params[key] = _PaperParameter(p, dim)
        self._cache: Dict[float, Dict[str, Tensor]] = {}
        self._cache_version: Tuple = ()

    def forward(self, e: Tensor) -> Dict[str, Tensor]:
        """{template parameter name: θ(τ)} for the time embedding e = e(τ)."""
        return {name: self.params[name.replace(".", "__")](e) for name in self.names}

    def at(self, tau: float, embedding: TimeEmbedding) -> Dict[str, Tensor]:
        """θ(τ); cached while no gradient is recorded and no parameter has changed."""
        if torch.is_grad_enabled():
            return self(embedding(tau))
        params = list(self.parameters()) + list(embedding.parameters())
        version = tuple(p._version for p in params) + (params[0].device, params[0].dtype)
        if version != self._cache_version:
            self._cache, self._cache_version = {}, version
        if tau not in self._cache:
            self._cache[tau] = self(embedding(tau))
        return self._cache[tau]
