"""The time-dependent layer kind: one layer whose weights are functions of depth, θ(τ).

A stack is one block integrating dy/dt = F_h(y; θ(τ)) over t ∈ [0, T] (T = the stack's layers)
with N steps of size h = T/N, τ = t/T ∈ [0, 1] being the paper's time (Tong et al., 2025).
Time convention: Euler evaluates the weights at the right end of each step, τ = (n+1)/N (the
solver's nodes are c = (1,)); a multi-stage method evaluates stage i at its own time,
τ = (n + c_i)/N. F_h is the residual branch with the layer's inner stream advanced by h
(:mod:`.fields`), so at T = N = L each Euler step is exactly a pre-norm layer with weights
θ((n+1)/L): the model exports to a plain L-layer Transformer.

The layer's own parameters are removed (θ(τ), :mod:`.time_weights`, starts from them); every
evaluation of F at time t passes the weights θ(t/T) to the layer's modules
(:meth:`~.kind.LayerKind.field_weights`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Dict, Optional, Tuple

from torch import Tensor, nn

from ode_seq.options import check_choice, option
from ode_seq.solvers import ButcherTableau

from .blocks import register_layer_kind
from .kind import LayerKind
from .time_weights import TIME_FORMS, TIME_NETWORKS, TimeDependentWeights, TimeEmbedding


@dataclass(frozen=True)
class TimeConfig:
    """The size and form of θ(τ)."""

    prefix: ClassVar[str] = "time_"
    embed_dim: int = option(20, "d_e, size of e(τ)", metavar="D")
    features: int = option(128, "sinusoid pairs in φ(τ)", metavar="S")
    hidden_dim: int = option(128, "width of the time MLP", metavar="H")
    weights: str = option(
        "paper",
        "θ(τ) form: paper (c + A e(τ)) or low-rank (W0 + U diag(B e(τ)) Vᵀ)",
        choices=TIME_FORMS,
    )
    rank: int = option(8, "rank r of the low-rank form", metavar="R")
    network: str = option(
        "per-block",
        "time networks e(tau): per-block (one MLP for all of a layer's weights) or "
        "per-weight (one MLP per Linear and LayerNorm, as the official code)",
        choices=TIME_NETWORKS,
    )

    def validate(self) -> None:
        if min(self.embed_dim, self.features, self.hidden_dim, self.rank) < 1:
            raise ValueError("--time-embed-dim, --time-features, --time-hidden-dim and --time-rank must be positive")
        check_choice("--time-weights", self.weights, TIME_FORMS)
        check_choice("--time-network", self.network, TIME_NETWORKS)


def _owner(root: nn.Module, name: str, create: bool = False) -> Tuple[nn.Module, str]:
    """(the module holding dotted ``name``, the attribute name), creating modules if asked."""
    *path, leaf = name.split(".")
    module = root
    for part in path:
        if create and not hasattr(module, part):
            setattr(module, part, nn.Module())
        module = getattr(module, part)
    return module, leaf


@register_layer_kind("time-dependent")
class TimeDependentLayer(LayerKind):
    """θ(τ) = theta(e(τ)) for every parameter of the layer (the coefficients excepted)."""

    options_class: ClassVar[type] = TimeConfig
    one_block_per_stack: ClassVar[bool] = True
    time_dependent_weights: ClassVar[bool] = True
    share_cross_attention: ClassVar[bool] = False  # W_K(τ), W_V(τ) differ between stages

    @classmethod
    def check_method(cls, side: str, method: str, adaptive: bool) -> None:
        if adaptive:
            raise ValueError(
                f"--{side}-ode-method {method}: non-autonomous stacks use fixed grids "
                "(weights are evaluated at each step's time); choose e.g. euler or rk4"
            )

    @classmethod
    def solver_nodes(cls, tableau: ButcherTableau) -> Optional[Tuple[float, ...]]:
        return (1.0,) if tableau.stages == 1 else None

    def finish_layer(self, cfg: Any) -> None:
        time: TimeConfig = self.spec.options
        own = [(n, p) for n, p in self.named_parameters() if not n.startswith(("combiner.", "corrector."))]
        template = nn.Module()
        for name, p in own:
            module, leaf = _owner(template, name, create=True)
            setattr(module, leaf, nn.Parameter(p.detach().clone()))
        network = (time.features, time.hidden_dim, time.embed_dim)
        if time.network == "per-block":
            self.time_embedding = TimeEmbedding(*network)
        self.theta = TimeDependentWeights(
            template,
            time.embed_dim,
            time.weights,
            time.rank,
            networks=network if time.network == "per-weight" else None,
        )
        for name, p in own:
            module, leaf = _owner(self, name)
            del module._parameters[leaf]
            # An empty placeholder, outside the state dict, that θ(t) replaces at every evaluation:
            # the module still has the attribute its code and its printout read (Linear's bias).
            module.register_buffer(leaf, p.new_empty(0), persistent=False)

    @property
    def stream_scale(self) -> float:
        """F_h advances the layer's inner stream by the step size h."""
        return self.solver.step_size

    def weights_at(self, tau: float) -> Dict[str, Tensor]:
        """θ(τ) for every parameter name of the layer."""
        return self.theta.at(tau, getattr(self, "time_embedding", None))

    def field_weights(self, t: float) -> Dict[str, Tensor]:
        return self.weights_at(t / self.solver.interval)
