"""Eigenvalue spectra of a Transformer layer's weight products (Tong et al., 2025, §2 analyses).

Row-vector convention, as the layers compute: a projection is x ↦ x W with W ∈ R^{in×out}
(PyTorch stores W as ``linear.weight.T``). Head h owns columns h·d_h … (h+1)·d_h − 1 of
W_Q, W_K, W_V and the same rows of W_O. The products analysed are

    attention logits   x_i W_Q^h W_K^hᵀ x_jᵀ · s      (s = 1/√d_h, the layer's scaling)
    value-output path  x_j W_V^h W_O^h
    feed-forward       x W_1 W_2                        (d × d; the activation is left out)

W_Q^h W_K^hᵀ and W_V^h W_O^h are d × d of rank ≤ d_h. AB and BA have the same non-zero
eigenvalues, so the d_h eigenvalues returned are those of the small d_h × d_h product (the other
d − d_h are zero); this also gives a square spectrum for cross-attention when the encoder and
decoder widths differ. Eigenvalues are complex and kept so.

Everything here takes matrices, not modules, so a time-dependent model can pass W(t) per step.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional

import numpy as np
import torch
from torch import Tensor


def product_eigenvalues(left: Tensor, right: Tensor) -> np.ndarray:
    """Non-zero spectrum of ``left @ right`` (n × n), computed from the smaller of LR and RL.

    ``left`` is n × m and ``right`` m × n; the result has min(n, m) complex eigenvalues, sorted
    by decreasing real part (ties by imaginary part).
    """
    if left.dim() != 2 or right.dim() != 2 or left.shape[1] != right.shape[0] or left.shape[0] != right.shape[1]:
        raise ValueError(
            f"eigenvalues of a product L·R need L of shape n×m and R of shape m×n, "
            f"got {tuple(left.shape)} and {tuple(right.shape)}"
        )
    a, b = left.detach().double().cpu(), right.detach().double().cpu()
    small = a @ b if a.shape[0] <= a.shape[1] else b @ a
    values = torch.linalg.eigvals(small).numpy()
    return values[np.lexsort((-values.imag, -values.real))]


@dataclass(frozen=True)
class AttentionWeights:
    """One attention sublayer's projections, each in → out (x ↦ x W), and its logit scaling."""

    w_q: Tensor
    w_k: Tensor
    w_v: Tensor
    w_o: Tensor
    heads: int
    scaling: float = 1.0

    def __post_init__(self) -> None:
        width = self.w_q.shape[1]
        if width % self.heads or self.w_k.shape[1] != width or self.w_v.shape[1] != width or self.w_o.shape[0] != width:
            raise ValueError(
                f"attention weights disagree: W_Q {tuple(self.w_q.shape)}, W_K "
                f"{tuple(self.w_k.shape)}, W_V {tuple(self.w_v.shape)}, W_O "
                f"{tuple(self.w_o.shape)} with {self.heads} heads; W_Q, W_K, W_V need the same "
                "number of output columns, divisible by the heads, and W_O as many rows"
            )

    @property
    def head_dim(self) -> int:
        return self.w_q.shape[1] // self.heads

    def head(self, h: int) -> slice:
        return slice(h * self.head_dim, (h + 1) * self.head_dim)


@dataclass(frozen=True)
class FeedForwardWeights:
    """W_1 (d × d_ff) and W_2 (d_ff × d) of x ↦ act(x W_1 + b_1) W_2 + b_2."""

    w_1: Tensor
    w_2: Tensor


def query_key_eigenvalues(attn: AttentionWeights) -> List[np.ndarray]:
    """Per head h: the d_h non-zero eigenvalues of s · W_Q^h W_K^hᵀ."""
    return [
        product_eigenvalues(attn.w_q[:, attn.head(h)] * attn.scaling, attn.w_k[:, attn.head(h)].T)
        for h in range(attn.heads)
    ]


def value_output_eigenvalues(attn: AttentionWeights) -> List[np.ndarray]:
    """Per head h: the d_h non-zero eigenvalues of W_V^h W_O^h."""
    return [product_eigenvalues(attn.w_v[:, attn.head(h)], attn.w_o[attn.head(h), :]) for h in range(attn.heads)]


def feed_forward_eigenvalues(ffn: FeedForwardWeights) -> np.ndarray:
    """The min(d, d_ff) non-zero eigenvalues of W_1 W_2."""
    return product_eigenvalues(ffn.w_1, ffn.w_2)


@dataclass(frozen=True)
class LayerWeights:
    """The analysed matrices of one layer (or of one time step t of a time-dependent model)."""

    depth: float
    self_attn: AttentionWeights
    ffn: FeedForwardWeights
    cross_attn: Optional[AttentionWeights] = None


def layer_spectra(layer: LayerWeights) -> Dict[str, object]:
    """{'depth', 'self_qk', 'self_vo', ['cross_qk', 'cross_vo'], 'ffn'}; per head for attention."""
    spectra: Dict[str, object] = {
        "depth": layer.depth,
        "self_qk": query_key_eigenvalues(layer.self_attn),
        "self_vo": value_output_eigenvalues(layer.self_attn),
        "ffn": feed_forward_eigenvalues(layer.ffn),
    }
    if layer.cross_attn is not None:
        spectra["cross_qk"] = query_key_eigenvalues(layer.cross_attn)
        spectra["cross_vo"] = value_output_eigenvalues(layer.cross_attn)
    return spectra


def spectrum_summary(values: np.ndarray) -> Dict[str, float]:
    """Spectral radius, mean real part and the fraction of eigenvalues with positive real part."""
    return {
        "spectral_radius": float(np.abs(values).max()),
        "mean_real": float(values.real.mean()),
        "fraction_positive_real": float((values.real > 0).mean()),
    }
