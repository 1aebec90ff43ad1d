"""Safe checkpoint loading: torch's ``weights_only`` unpickler plus fairseq's checkpoint types."""
from __future__ import annotations

import argparse

import torch


def allow_fairseq_checkpoint_types() -> None:
    """Allow-list the non-tensor types fairseq writes into checkpoints; safe loading stays on."""
    torch.serialization.add_safe_globals([argparse.Namespace])
