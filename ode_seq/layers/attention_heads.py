"""Shared pieces of ode-seq's fairseq attention variants: the key/value cache, masking logits,
combining heads, and :class:`HeadwiseAttention`, the forward pass they share."""

from __future__ import annotations

from typing import Optional, Tuple

import torch
from fairseq import utils
from fairseq.modules.multihead_attention import MultiheadAttention
from torch import Tensor, nn

from .stage_caches import IncrementalState


def cached_keys_values(
    attention: MultiheadAttention,
    incremental_state: IncrementalState,
    k: Optional[Tensor],
    v: Optional[Tensor],
    key_padding_mask: Optional[Tensor],
    bsz: int,
    static_kv: bool,
) -> Tuple[Tensor, Tensor, Optional[Tensor]]:
    """Keys/values (B·H, S, d_h) and padding mask after prepending the cached ones (or, for
    static keys, reusing them); the result is stored in fairseq's cache format (B, H, S, d_h)."""
    saved = attention._get_input_buffer(incremental_state)
    heads, head_dim = attention.num_heads, attention.head_dim
    if saved.get("prev_key") is not None:
        prev_k = saved["prev_key"].view(bsz * heads, -1, head_dim)
        prev_v = saved["prev_value"].view(bsz * heads, -1, head_dim)
        if static_kv:
            k, v = prev_k, prev_v
        else:
            k = torch.cat([prev_k, k], dim=1)
            v = torch.cat([prev_v, v], dim=1)
    assert k is not None and v is not None
    key_padding_mask = MultiheadAttention._append_prev_key_padding_mask(
        key_padding_mask, saved.get("prev_key_padding_mask"), bsz, k.size(1), static_kv
    )
    saved["prev_key"] = k.view(bsz, heads, -1, head_dim)
    saved["prev_value"] = v.view(bsz, heads, -1, head_dim)
    saved["prev_key_padding_mask"] = key_padding_mask
    attention._set_input_buffer(incremental_state, saved)
    return k, v, key_padding_mask


def masked_logits(logits: Tensor, attn_mask: Optional[Tensor], key_padding_mask: Optional[Tensor], bsz: int) -> Tensor:
    """Logits (B·H, T, S) plus the additive ``attn_mask`` (T, S), −inf at padded keys (B, S)."""
    if attn_mask is not None:
        logits = logits + attn_mask.unsqueeze(0)
    if key_padding_mask is None:
        return logits
    bh, tgt_len, src_len = logits.shape
    masked = logits.view(bsz, bh // bsz, tgt_len, src_len).masked_fill(
        key_padding_mask[:, None, None, :].to(torch.bool), float("-inf")
    )
    return masked.view(bh, tgt_len, src_len)


def attend(
    attention: nn.Module,
    probs: Tensor,
    v: Tensor,
    bsz: int,
    need_weights: bool,
    need_head_weights: bool,
) -> Tuple[Tensor, Optional[Tensor]]:
    """out_proj(dropout(probs)·v) as (T, B, C), and the head-averaged or per-head weights."""
    bh, tgt_len, src_len = probs.shape
    out = torch.bmm(attention.dropout_module(probs), v)
    out = attention.out_proj(out.transpose(0, 1).contiguous().view(tgt_len, bsz, attention.embed_dim))
    weights: Optional[Tensor] = None
    if need_weights or need_head_weights:
        weights = probs.view(bsz, bh // bsz, tgt_len, src_len).transpose(1, 0)
        if not need_head_weights:
            weights = weights.mean(dim=0)
    return out, weights


class HeadwiseAttention(MultiheadAttention):
    """fairseq's attention (its projections, cache format and forward signature) computed as

        P = softmax(masked(logits(q, k))),    out = out_proj(dropout(P) · v)

    per head, q from :meth:`project_queries`, k and v from :meth:`project_keys_values` (or
    fairseq's cache); a subclass defines :meth:`logits`, and :meth:`observe` sees every P."""

    def project_queries(self, query: Tensor) -> Tensor:
        """W_Q x, (T, B, C)."""
        return self.q_proj(query)

    def project_keys_values(
        self, query: Tensor, key: Optional[Tensor], value: Optional[Tensor]
    ) -> Tuple[Tensor, Tensor]:
        """W_K key and W_V value, (S, B, C)."""
        assert key is not None and value is not None
        return self.k_proj(key), self.v_proj(value)

    def logits(self, q: Tensor, k: Tensor) -> Tensor:
        """Attention logits (B·H, T, S) of queries q (B·H, T, d_h) and keys k (B·H, S, d_h)."""
        raise NotImplementedError

    def observe(self, probs: Tensor, logits: Tensor, key_padding_mask: Optional[Tensor], cached: bool) -> None:
        """Sees each forward's P and masked logits (B·H, T, S), its keys' padding mask (B, S) and
        whether a key/value cache was in use; nothing here."""

    def split_heads(self, x: Tensor, bsz: int) -> Tensor:
        """(T, B, H·d_h) → (B·H, T, d_h)."""
        return x.contiguous().view(-1, bsz * self.num_heads, self.head_dim).transpose(0, 1)

    def forward(
        self,
        query: Tensor,
        key: Optional[Tensor],
        value: Optional[Tensor],
        key_padding_mask: Optional[Tensor] = None,
        incremental_state: Optional[IncrementalState] = None,
        need_weights: bool = True,
        static_kv: bool = False,
        attn_mask: Optional[Tensor] = None,
        before_softmax: bool = False,
        need_head_weights: bool = False,
    ) -> Tuple[Tensor, Optional[Tensor]]:
        if need_head_weights:
            need_weights = True
        bsz = query.size(1)
        q = self.split_heads(self.project_queries(query), bsz)
        reuse_static = (
            incremental_state is not None
            and static_kv
            and self._get_input_buffer(incremental_state).get("prev_key") is not None
        )
        k: Optional[Tensor] = None
        v: Optional[Tensor] = None
        if not reuse_static:
            k, v = (self.split_heads(x, bsz) for x in self.project_keys_values(query, key, value))
        if incremental_state is not None:
            k, v, key_padding_mask = cached_keys_values(self, incremental_state, k, v, key_padding_mask, bsz, static_kv)
        assert k is not None and v is not None
        logits = masked_logits(self.logits(q, k), attn_mask, key_padding_mask, bsz)
        if before_softmax:
            return logits, v
        probs = utils.softmax(logits, dim=-1).type_as(logits)
        self.observe(probs, logits, key_padding_mask, incremental_state is not None)
        return attend(self, probs, v, bsz, need_weights, need_head_weights)
