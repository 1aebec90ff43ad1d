"""Bias-free multi-head attention with a dot-product or L2-distance kernel.

    dot:  P = softmax(q_i · k_j / √d)
    l2:   P = softmax(−‖q_i − k_j‖² / √d)        (d = head dimension)

The L2 kernel is the Lipschitz attention of Kim et al. (2021) as used by ODE-ViT (Kim et al.
also tie W_Q = W_K for their global bound; the projections here stay separate).
The module keeps fairseq's projections (``q_proj`` … ``out_proj``, without biases) and its
key/value cache format, so fairseq's incremental decoding, beam reordering and the per-stage
caches of :mod:`ode_seq.layers.stage_caches` work unchanged. Probability hooks
(:meth:`StableMultiheadAttention.register_probability_hook`) receive every call's per-head
probabilities, e.g. for the JaSMin penalty (:mod:`ode_seq.models.criteria.jasmin`).
"""

from __future__ import annotations

import collections
from dataclasses import dataclass
from typing import Callable, Dict, Optional

import torch
from torch import Tensor
from torch.utils.hooks import RemovableHandle

from ..attention_heads import HeadwiseAttention

ATTENTION_KERNELS = ("dot", "l2")


@dataclass
class AttentionRecord:
    """One call's probabilities (B, H, T, S), the query padding mask (B, T) of self-attention
    without a cache (None otherwise), and the number of keys each row may attend to (B, H, T)."""

    probs: Tensor
    query_padding_mask: Optional[Tensor]
    available_keys: Tensor


class StableMultiheadAttention(HeadwiseAttention):
    """fairseq's attention without biases and with the ``kernel`` of the attention logits."""

    def __init__(
        self,
        embed_dim: int,
        num_heads: int,
        kernel: str = "dot",
        kdim: Optional[int] = None,
        vdim: Optional[int] = None,
        dropout: float = 0.0,
        self_attention: bool = False,
        encoder_decoder_attention: bool = False,
    ) -> None:
        if kernel not in ATTENTION_KERNELS:
            raise ValueError(f"attention kernel {kernel!r} is not valid; choose one of: {', '.join(ATTENTION_KERNELS)}")
        super().__init__(
            embed_dim,
            num_heads,
            kdim=kdim,
            vdim=vdim,
            dropout=dropout,
            bias=False,
            self_attention=self_attention,
            encoder_decoder_attention=encoder_decoder_attention,
        )
        self.kernel = kernel
        self._probability_hooks: Dict[int, Callable[[AttentionRecord], None]] = collections.OrderedDict()

    def register_probability_hook(self, hook: Callable[[AttentionRecord], None]) -> RemovableHandle:
        """Call ``hook`` with the :class:`AttentionRecord` of every forward until the handle is removed."""
        handle = RemovableHandle(self._probability_hooks)
        self._probability_hooks[handle.id] = hook
        return handle

    def logits(self, q: Tensor, k: Tensor) -> Tensor:
        """(B·H, T, S) logits: q·k/√d, or −‖q − k‖²/√d = −(‖q‖² + ‖k‖² − 2 q·k)/√d."""
        if self.kernel == "dot":
            return torch.bmm(q, k.transpose(1, 2)) * self.scaling
        squared = q.pow(2).sum(-1, keepdim=True) + k.pow(2).sum(-1).unsqueeze(1)
        distance = torch.baddbmm(squared, q, k.transpose(1, 2), alpha=-2.0)
        return -distance * self.scaling

    def observe(self, probs: Tensor, logits: Tensor, key_padding_mask: Optional[Tensor], cached: bool) -> None:
        """Calls the probability hooks with this forward's :class:`AttentionRecord`."""
        if not self._probability_hooks:
            return
        bh, tgt_len, src_len = probs.shape
        shape = (bh // self.num_heads, self.num_heads, tgt_len, src_len)
        queries_are_keys = self.self_attention and not cached and tgt_len == src_len
        record = AttentionRecord(
            probs=probs.view(shape),
            query_padding_mask=key_padding_mask if queries_are_keys else None,
            available_keys=torch.isfinite(logits.detach()).view(shape).sum(dim=-1),
        )
        for hook in self._probability_hooks.values():
            hook(record)
