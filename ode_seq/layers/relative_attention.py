"""Self-attention with Shaw-style relative position keys (Shaw et al., 2018), keys only.

    e_ij = q_i · (k_j + r_{clip(j − i, −K, K)}) / √d_h,    r ∈ R^{(2K+1) × d_h}, shared by heads.

Query i sits at absolute position (S − T + i) when T queries attend to S keys, so the same
formula serves full sequences and incremental decoding with a key/value cache.
"""

from __future__ import annotations

from typing import Optional, Tuple

import torch
from fairseq import utils
from fairseq.modules.multihead_attention import MultiheadAttention
from torch import Tensor, nn

from .attention_heads import attend, cached_keys_values, masked_logits
from .stage_caches import IncrementalState


class RelativePositionSelfAttention(MultiheadAttention):
    """fairseq's self-attention (same projections and cache format) plus relative keys."""

    def __init__(self, embed_dim: int, num_heads: int, max_relative_position: int, dropout: float = 0.0) -> None:
        super().__init__(embed_dim, num_heads, dropout=dropout, self_attention=True)
        self.max_relative_position = max_relative_position
        self.relative_keys = nn.Embedding(2 * max_relative_position + 1, self.head_dim)
        nn.init.xavier_uniform_(self.relative_keys.weight)

    def _relative_logits(self, q: Tensor, src_len: int) -> Tensor:
        """q (B·H, T, d_h) → q_i · r_{clip(j − i)} of shape (B·H, T, S)."""
        tgt_len = q.size(1)
        query_pos = torch.arange(src_len - tgt_len, src_len, device=q.device)
        key_pos = torch.arange(src_len, device=q.device)
        distance = (key_pos[None, :] - query_pos[:, None]).clamp(
            -self.max_relative_position, self.max_relative_position
        )
        r = self.relative_keys(distance + self.max_relative_position).to(q.dtype)
        return torch.einsum("btd,tsd->bts", q, r)

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
        heads, head_dim = self.num_heads, self.head_dim

        def split_heads(x: Tensor) -> Tensor:
            return x.contiguous().view(-1, bsz * heads, head_dim).transpose(0, 1)

        q = split_heads(self.q_proj(query) * self.scaling)
        k = split_heads(self.k_proj(query))
        v = split_heads(self.v_proj(query))
        if incremental_state is not None:
            k, v, key_padding_mask = cached_keys_values(
                self, incremental_state, k, v, key_padding_mask, bsz, static_kv=False
            )
        src_len = k.size(1)

        logits = torch.bmm(q, k.transpose(1, 2)) + self._relative_logits(q, src_len)
        logits = masked_logits(logits, attn_mask, key_padding_mask, bsz)
        if before_softmax:
            return logits, v
        probs = utils.softmax(logits, dim=-1).type_as(logits)
        return attend(self, probs, v, bsz, need_weights, need_head_weights)
