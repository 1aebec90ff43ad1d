"""Self-attention with Shaw-style relative position keys (Shaw et al., 2018), keys only.

    e_ij = q_i · (k_j + r_{clip(j − i, −K, K)}) / √d_h,    r ∈ R^{(2K+1) × d_h}, shared by heads.

Query i sits at absolute position (S − T + i) when T queries attend to S keys, so the same
formula serves full sequences and incremental decoding with a key/value cache.
"""

from __future__ import annotations

from typing import Optional, Tuple

import torch
from torch import Tensor, nn

from .attention_heads import HeadwiseAttention


class RelativePositionSelfAttention(HeadwiseAttention):
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

    def project_queries(self, query: Tensor) -> Tensor:
        """W_Q x / √d_h: the relative logits use the scaled queries too."""
        return self.q_proj(query) * self.scaling

    def project_keys_values(
        self, query: Tensor, key: Optional[Tensor], value: Optional[Tensor]
    ) -> Tuple[Tensor, Tensor]:
        """W_K x and W_V x of the queries' own sequence x (self-attention)."""
        return self.k_proj(query), self.v_proj(query)

    def logits(self, q: Tensor, k: Tensor) -> Tensor:
        """q_i · (k_j + r_{clip(j − i)}), q already scaled."""
        return torch.bmm(q, k.transpose(1, 2)) + self._relative_logits(q, k.size(1))
