"""Non-autonomous ODE blocks: one layer whose weights are functions of depth, θ(τ).

The block integrates dy/dt = F_h(y; θ(τ)) over t ∈ [0, T] with N steps of size h = T/N, where
τ = t/T ∈ [0, 1] is the paper's time. Time convention (Tong et al.): forward Euler evaluates
the weights at the right end of each interval, τ = (n+1)/N; a multi-stage method evaluates
stage i at its own time, τ = (n + c_i)/N. F_h is the residual branch with the layer's inner
stream advanced by h (see :mod:`ode_seq.fields`), so at T = N = L each Euler step is exactly a
pre-norm layer with weights θ((n+1)/L): the model exports to a plain L-layer Transformer.

The layer's own parameters are removed; before every stage the weights θ(τ) are installed
into it, so fairseq's unchanged layer code runs with time-dependent weights.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict

from torch import Tensor, nn

from .blocks import DecoderODEBlock, EncoderODEBlock, Integration
from .time_dependent import TimeDependentWeights, TimeEmbedding


@dataclass(frozen=True)
class TimeConfig:
    """Sizes of the time dependence: d_e, time-feature count s, MLP width, θ form and rank."""

    embed_dim: int = 20
    features: int = 128
    hidden: int = 128
    form: str = "paper"
    rank: int = 8


class _TimeDependentLayer:
    """Mixin for an ODE block: replaces the layer's parameters by θ(τ) = theta(e(τ))."""

    integration: Integration

    def _init_time(self, time: TimeConfig) -> None:
        own = [(n, p) for n, p in self.named_parameters() if not n.startswith("combiner.")]
        template = nn.Module()
        for name, p in own:
            _set(template, name, nn.Parameter(p.detach().clone()), create=True)
        self.time_embedding = TimeEmbedding(time.features, time.hidden, time.embed_dim)
        self.theta = TimeDependentWeights(template, time.embed_dim, time.form, time.rank)
        for name, p in own:
            module, leaf = _owner(self, name)
            del module._parameters[leaf]
            setattr(module, leaf, p.detach())
        self.stream_scale = self.integration.interval / self.integration.steps

    def stage_time(self, stage: int, step: int) -> float:
        """τ of stage ``stage`` of step ``step`` (Euler: the right end of the interval)."""
        tableau = self.integration.tableau
        c = 1.0 if tableau.stages == 1 else tableau.c[stage]
        return (step + c) / self.integration.steps

    def weights_at(self, tau: float) -> Dict[str, Tensor]:
        return self.theta.at(tau, self.time_embedding)

    def install(self, weights: Dict[str, Tensor]) -> None:
        for name, value in weights.items():
            _set(self, name, value)

    def stage_field(self, z: Tensor, stage: int, step: int, *args: Any, **kwargs: Any):
        self.install(self.weights_at(self.stage_time(stage, step)))
        return self.field(z, *args, **kwargs)


def _owner(root: nn.Module, name: str):
    *path, leaf = name.split(".")
    module = root
    for part in path:
        module = getattr(module, part)
    return module, leaf


def _set(root: nn.Module, name: str, value, create: bool = False) -> None:
    *path, leaf = name.split(".")
    module = root
    for part in path:
        if create and not hasattr(module, part):
            setattr(module, part, nn.Module())
        module = getattr(module, part)
    setattr(module, leaf, value)


class NonAutonomousEncoderBlock(_TimeDependentLayer, EncoderODEBlock):
    """The whole encoder as one block with weights θ(τ)."""

    def __init__(self, cfg, integration: Integration, combiner: nn.Module, time: TimeConfig, **kwargs) -> None:
        super().__init__(cfg, integration, combiner, **kwargs)
        self._init_time(time)


class NonAutonomousDecoderBlock(_TimeDependentLayer, DecoderODEBlock):
    """The whole decoder as one block with weights θ(τ); one cache per (step, stage), including
    cross-attention keys/values, since W_K(τ) and W_V(τ) differ between stages."""

    share_cross_attention = False

    def __init__(self, cfg, integration: Integration, combiner: nn.Module, time: TimeConfig, **kwargs) -> None:
        super().__init__(cfg, integration, combiner, **kwargs)
        self._init_time(time)
