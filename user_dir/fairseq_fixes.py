"""Fixes to fairseq 0.12 behaviour that would silently lose a user's data, applied on import.

- ``data_utils.batch_by_size`` drops the last batch when its size is not a multiple of
  ``--required-batch-size-multiple`` (default 8). Batches are consecutive slices of the
  length-sorted indices, so that batch holds the *longest* sentences: fairseq-train never
  trains on them and fairseq-generate never translates them. The fix keeps fairseq's batches
  and appends the dropped tail as one more batch, so every index is in exactly one batch.
- torch >= 2.6 loads checkpoints with ``weights_only=True`` and refuses fairseq's
  ``argparse.Namespace``; it is allow-listed (safe loading stays on).
"""
from __future__ import annotations

import functools

import numpy as np
from fairseq.data import data_utils

from ode_seq.checkpoint_safety import allow_fairseq_checkpoint_types


def _keeping_every_index(batch_by_size):
    @functools.wraps(batch_by_size)
    def wrapper(indices, *args, **kwargs):
        if not isinstance(indices, np.ndarray):
            indices = np.fromiter(indices, dtype=np.int64, count=-1)
        batches = batch_by_size(indices, *args, **kwargs)
        covered = sum(len(b) for b in batches)
        if covered < len(indices):
            batches = list(batches) + [indices[covered:]]
        return batches

    wrapper.keeps_every_index = True
    return wrapper


def apply() -> None:
    if not getattr(data_utils.batch_by_size, "keeps_every_index", False):
        data_utils.batch_by_size = _keeping_every_index(data_utils.batch_by_size)
    allow_fairseq_checkpoint_types()
