"""Shared pieces of ode-seq's fairseq attention variants: masking logits and combining heads."""
from __future__ import annotations

from typing import Optional, Tuple

import torch
from torch import Tensor, nn


def masked_logits(
    logits: Tensor, attn_mask: Optional[Tensor], key_padding_mask: Optional[Tensor], bsz: int
) -> Tensor:
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
