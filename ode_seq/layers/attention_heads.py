"""Shared pieces of ode-seq's fairseq attention variants: the key/value cache, masking logits
and combining heads."""

from __future__ import annotations

from typing import Optional, Tuple

import torch
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
