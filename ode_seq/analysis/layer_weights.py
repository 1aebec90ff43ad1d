"""Weight matrices of fairseq Transformer layers in the form :mod:`ode_seq.analysis.spectra` takes.

A stack's layers are found by type, so Runge–Kutta blocks (which subclass fairseq's layers),
blocks wrapped for layer history, and plain fairseq layers are all read the same way. Depth is
time: a plain layer is one unit, a Runge–Kutta block covers its solver's interval [t, t + T]
(a weight-shared group of k layers covers k units). An autonomous block has one set of weights,
reported at the start of its interval; a time-dependent block has the weights θ(t) of every
time t at which its solver evaluates them (Euler: the right end of each step).
"""

from __future__ import annotations

from typing import Callable, List, Mapping, Optional

from fairseq.modules.multihead_attention import MultiheadAttention
from fairseq.modules.transformer_layer import (
    TransformerDecoderLayerBase,
    TransformerEncoderLayerBase,
)
from torch import Tensor, nn

from ode_seq.layers.time_dependent import TimeDependentLayer

from .spectra import AttentionWeights, FeedForwardWeights, LayerWeights

LAYER_TYPES = (TransformerEncoderLayerBase, TransformerDecoderLayerBase)


def attention_weights(attn: MultiheadAttention, weight: Optional[Callable[[str], Tensor]] = None) -> AttentionWeights:
    """W_Q, W_K, W_V, W_O (in × out) and logit scaling 1/√d_h of a fairseq attention module;
    ``weight(name)`` gives projection ``name``'s weight if not the module's own."""
    weight = weight or (lambda name: getattr(attn, name).weight)
    return AttentionWeights(
        w_q=weight("q_proj").T,
        w_k=weight("k_proj").T,
        w_v=weight("v_proj").T,
        w_o=weight("out_proj").T,
        heads=attn.num_heads,
        scaling=float(attn.scaling),
    )


def stack_layers(stack: nn.Module) -> List[nn.Module]:
    """The Transformer layers of an encoder or decoder, in order (wrappers looked through)."""
    return [m for m in stack.modules() if isinstance(m, LAYER_TYPES)]


def layer_weights(layer: nn.Module, depth: float, parameters: Optional[Mapping[str, Tensor]] = None) -> LayerWeights:
    """The matrices of one fairseq encoder or decoder layer; ``parameters`` (name → tensor, e.g.
    θ(t) of a time-dependent layer) replace the layer's own."""

    def weight(name: str) -> Tensor:
        if parameters is not None:
            return parameters[f"{name}.weight"]
        module = layer
        for part in name.split("."):
            module = getattr(module, part)
        return module.weight

    def attention(name: str) -> AttentionWeights:
        return attention_weights(getattr(layer, name), lambda proj: weight(f"{name}.{proj}"))

    cross = getattr(layer, "encoder_attn", None)
    return LayerWeights(
        depth=depth,
        self_attn=attention("self_attn"),
        ffn=FeedForwardWeights(w_1=weight("fc1").T, w_2=weight("fc2").T),
        cross_attn=attention("encoder_attn") if cross is not None else None,
    )


def stack_weights(stack: nn.Module) -> List[LayerWeights]:
    """One :class:`LayerWeights` per distinct set of weights along depth (see the module docstring)."""
    weights: List[LayerWeights] = []
    clock = 0.0
    for layer in stack_layers(stack):
        solver = getattr(layer, "solver", None)
        if isinstance(layer, TimeDependentLayer):
            times = sorted({solver.stage_time(n, i) for n in range(solver.steps) for i in range(solver.tableau.stages)})
            for t in times:
                weights.append(layer_weights(layer, clock + t, layer.weights_at(t / solver.interval)))
        else:
            weights.append(layer_weights(layer, clock))
        clock += solver.interval if solver is not None else 1.0
    return weights
