"""Safe checkpoint loading: torch's ``weights_only`` unpickler plus the types fairseq writes.

fairseq checkpoints hold tensors, plain containers and the training ``argparse.Namespace``.
Only those are allow-listed; any other pickled global is refused, so a hostile checkpoint
cannot run code. Safe loading is never switched off.
"""
from __future__ import annotations

import argparse
from typing import Any, Dict

import torch

FAIRSEQ_CHECKPOINT_TYPES = [argparse.Namespace]


def allow_fairseq_checkpoint_types() -> None:
    """Allow-list the non-tensor types fairseq writes into checkpoints."""
    torch.serialization.add_safe_globals(FAIRSEQ_CHECKPOINT_TYPES)


def load_checkpoint(path: str) -> Dict[str, Any]:
    """torch.load(path) with safe loading; a refused type raises ValueError naming file and type."""
    allow_fairseq_checkpoint_types()
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as error:  # torch raises UnpicklingError with the refused global's name
        if "weights_only" in str(error) or "Unsupported global" in str(error):
            raise ValueError(
                f"refusing to load {path}: it contains a pickled object that is not a tensor or "
                f"a fairseq checkpoint type ({_refused_global(str(error))}); only load "
                "checkpoints you trust"
            ) from None
        raise


def _refused_global(message: str) -> str:
    for line in message.splitlines():
        if "Unsupported global" in line:
            return line.strip()
    return message.splitlines()[0] if message else "unknown type"
