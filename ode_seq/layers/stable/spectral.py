"""Spectral-norm-1 linear maps: at initialisation, and optionally throughout training."""

from __future__ import annotations

import torch
from torch import nn
from torch.nn.utils.parametrizations import spectral_norm


def spectral_init_(linear: nn.Linear) -> None:
    """W ← W₀ / σ_max(W₀) with W₀ xavier-uniform, so ‖W‖₂ = 1; a bias, if any, is zeroed."""
    with torch.no_grad():
        nn.init.xavier_uniform_(linear.weight)
        linear.weight.div_(torch.linalg.matrix_norm(linear.weight, ord=2))
        if linear.bias is not None:
            linear.bias.zero_()


def constrain_spectral_norm(linear: nn.Linear) -> nn.Linear:
    """Reparametrise W as W/σ̂(W), σ̂ by one power iteration per training forward (Miyato et al.).

    In eval mode σ̂ uses the stored singular vectors, so decoding is deterministic. The weight
    is stored as ``parametrizations.weight.original`` with buffers ``_u`` and ``_v``.
    """
    return spectral_norm(linear)
