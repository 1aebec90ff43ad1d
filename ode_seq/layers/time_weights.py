"""Weights as functions of depth (Tong et al., ICLR 2025): θ(τ) for every parameter of a layer.

    φ(τ) = [τ, sin(1000 τ ω_k), cos(1000 τ ω_k)]_{k<s},  ω_k = exp(−ln(10⁴)·k/s)
    e(τ) = Lin2(SiLU(Lin1(φ(τ)))) ∈ R^{d_e}            (Lin2 zero-initialised: e ≡ 0 at init)

Two forms of θ_p(τ) for a parameter p with n_p entries:

- ``paper``: θ_p(τ) = c_p + A_p e(τ), A_p ∈ R^{n_p × d_e}: (d_e + 1)·n_p parameters.
- ``low-rank`` (parameter budget): matrices W(τ) = W0 + U diag(B e(τ)) Vᵀ with U ∈ R^{out×r},
  V ∈ R^{in×r}, B ∈ R^{r×d_e} (out·in + r·(out + in + d_e) parameters); vectors as in ``paper``.

c_p / W0 start from the layer's own initialisation, so with e ≡ 0 the model starts autonomous
(the same weights at every τ).

Two choices of time network (the MLP giving e(τ)):

- ``per-block``: one e(τ) shared by every parameter of the layer.
- ``per-weight``: one network per module of the layer (each Linear: weight and bias; each
  LayerNorm: gain and bias), e_M(τ) for module M, as the official code of Tong et al. builds
  its ``TemporalLinear`` / ``TemporalLayerNorm``. fairseq keeps W_Q, W_K, W_V as three Linears
  where that code has one fused QKV projection, so attention has three networks there, not one.

A network costs (2s + 1)·H + H + H·d_e + d_e parameters (H: its hidden width).
"""

from __future__ import annotations

import math
from typing import Dict, Optional, Tuple

import torch
from torch import Tensor, nn

TIME_FORMS = ("paper", "low-rank")
TIME_NETWORKS = ("per-block", "per-weight")


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


def module_of(name: str) -> str:
    """The module that owns parameter ``name`` (``self_attn.q_proj`` for ``self_attn.q_proj.weight``)."""
    return name.rpartition(".")[0]


class TimeDependentWeights(nn.Module):
    """θ(τ) for every parameter of ``template`` (a module whose own parameters stay unused);
    ``form`` is one of ``TIME_FORMS``. With ``networks`` (features, hidden, d_e) every module of
    the template gets its own time network (``per-weight``); without, :meth:`at` takes the
    layer's one shared network (``per-block``)."""

    def __init__(
        self,
        template: nn.Module,
        dim: int,
        form: str = "paper",
        rank: int = 8,
        networks: Optional[Tuple[int, int, int]] = None,
    ) -> None:
        super().__init__()
        self.names = [name for name, _ in template.named_parameters()]
        self.params = nn.ModuleDict()
        for name, p in template.named_parameters():
            key = name.replace(".", "__")
            if form == "low-rank" and p.dim() == 2:
                self.params[key] = _LowRankMatrix(p, dim, rank)
            else:
                self.params[key] = _PaperParameter(p, dim)
        self.networks: Optional[nn.ModuleDict] = None
        if networks is not None:
            modules = dict.fromkeys(module_of(name).replace(".", "__") for name in self.names)
            self.networks = nn.ModuleDict({m: TimeEmbedding(*networks) for m in modules})
        self._cache: Dict[float, Dict[str, Tensor]] = {}
        self._cache_version: Tuple = ()

    def forward(self, tau: float, shared: Optional[TimeEmbedding] = None) -> Dict[str, Tensor]:
        """{template parameter name: θ(τ)}, e(τ) from each module's network or from ``shared``."""
        if self.networks is None:
            e = shared(tau)
            return {name: self.params[name.replace(".", "__")](e) for name in self.names}
        embeddings = {m: network(tau) for m, network in self.networks.items()}
        return {
            name: self.params[name.replace(".", "__")](embeddings[module_of(name).replace(".", "__")])
            for name in self.names
        }

    def train(self, mode: bool = True) -> "TimeDependentWeights":
        """Switching between training and evaluation drops the cached θ(τ): optimisers (fairseq's
        Adam among them) update parameters through ``p.data``, which leaves the version counters
        that key the cache unchanged, so validation after an update would see stale weights."""
        self._cache, self._cache_version = {}, ()
        return super().train(mode)

    def at(self, tau: float, shared: Optional[TimeEmbedding] = None) -> Dict[str, Tensor]:
        """θ(τ); cached while no gradient is recorded and no parameter has changed (in place, or
        through ``p.data`` before the next switch of training mode)."""
        if torch.is_grad_enabled():
            return self(tau, shared)
        params = list(self.parameters()) + (list(shared.parameters()) if shared is not None else [])
        version = tuple(p._version for p in params) + (params[0].device, params[0].dtype)
        if version != self._cache_version:
            self._cache, self._cache_version = {}, version
        if tau not in self._cache:
            self._cache[tau] = self(tau, shared)
        return self._cache[tau]
