"""The stable layer kind for ODE Transformers (ODE-ViT, Boned Riera et al., 2025), for seq2seq.

The field keeps fairseq's layer structure (see :mod:`ode_seq.fields`) with three changes
that make it globally Lipschitz or at least well conditioned:

- CenterNorm instead of LayerNorm: CN(x) = γ ⊙ (D/(D−1))·(x − mean x) + β (no division by the
  standard deviation, so CN is affine in x);
- bias-free projections, every one initialised with spectral norm 1 (xavier, then divided by the
  largest singular value), optionally kept at spectral norm 1 during training;
- optionally L2-distance attention softmax(−‖q_i − k_j‖²/√d) instead of softmax(q_i·k_j/√d).
"""

from .attention import ATTENTION_KERNELS, AttentionRecord, StableMultiheadAttention
from .center_norm import CenterNorm
from .layer import StableConfig, StableLayer
from .spectral import constrain_spectral_norm, spectral_init_

__all__ = [
    "ATTENTION_KERNELS",
    "AttentionRecord",
    "CenterNorm",
    "StableConfig",
    "StableLayer",
    "StableMultiheadAttention",
    "constrain_spectral_norm",
    "spectral_init_",
]
