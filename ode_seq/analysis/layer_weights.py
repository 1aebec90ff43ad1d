"""Weight matrices of fairseq Transformer layers in the form :mod:`ode_seq.analysis.spectra` takes.

A stack's layers are found by type, so Runge–Kutta blocks (which subclass fairseq's layers),
blocks wrapped for layer history, and plain fairseq layers are all read the same way; depth is
the layer index (one block = one unit of time with h = 1).
"""
from __future__ import annotations

from typing import List

from fairseq.modules.multihead_attention import MultiheadAttention
from fairseq.modules.transformer_layer import (
    TransformerDecoderLayerBase,
    TransformerEncoderLayerBase,
)
from torch import nn

from .spectra import AttentionWeights, FeedForwardWeights, LayerWeights

LAYER_TYPES = (TransformerEncoderLayerBase, TransformerDecoderLayerBase)


def attention_weights(attn: MultiheadAttention) -> AttentionWeights:
    """W_Q, W_K, W_V, W_O (in × out) and logit scaling 1/√d_h of a fairseq attention module."""
    return AttentionWeights(
        w_q=attn.q_proj.weight.T,
        w_k=attn.k_proj.weight.T,
        w_v=attn.v_proj.weight.T,
        w_o=attn.out_proj.weight.T,
        heads=attn.num_heads,
        scaling=float(attn.scaling),
    )


def stack_layers(stack: nn.Module) -> List[nn.Module]:
    """The Transformer layers of an encoder or decoder, in order (wrappers looked through)."""
    return [m for m in stack.modules() if isinstance(m, LAYER_TYPES)]


def layer_weights(layer: nn.Module, depth: float) -> LayerWeights:
    """The matrices of one fairseq encoder or decoder layer."""
    cross = getattr(layer, "encoder_attn", None)
    return LayerWeights(
        depth=depth,
        self_attn=attention_weights(layer.self_attn),
        ffn=FeedForwardWeights(w_1=layer.fc1.weight.T, w_2=layer.fc2.weight.T),
        cross_attn=attention_weights(cross) if cross is not None else None,
    )


def stack_weights(stack: nn.Module) -> List[LayerWeights]:
    """One :class:`LayerWeights` per layer, depth = layer index."""
    return [layer_weights(layer, float(i)) for i, layer in enumerate(stack_layers(stack))]
