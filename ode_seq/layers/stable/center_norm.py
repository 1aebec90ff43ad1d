"""CenterNorm: LayerNorm without the division by the standard deviation."""

from __future__ import annotations

import torch
from torch import Tensor, nn


class CenterNorm(nn.Module):
    """CN(x) = γ ⊙ (D/(D−1))·(x − mean(x)) + β over the last dimension of size D.

    CN is affine in x, so it is globally Lipschitz with constant (D/(D−1))·max|γ| (the centring
    projection has norm 1). ``weight`` = γ and ``bias`` = β carry LayerNorm's names and shapes.
    """

    def __init__(self, dim: int) -> None:
        super().__init__()
        if dim < 2:
            raise ValueError(f"CenterNorm needs a dimension of at least 2, got {dim}")
        self.dim = dim
        self.scale = dim / (dim - 1)
        self.weight = nn.Parameter(torch.ones(dim))
        self.bias = nn.Parameter(torch.zeros(dim))

    def forward(self, x: Tensor) -> Tensor:
        centred = x - x.mean(dim=-1, keepdim=True)
        return self.weight * (self.scale * centred) + self.bias

    def extra_repr(self) -> str:
        return f"{self.dim}"
