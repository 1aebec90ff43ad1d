"""Keep the batch fairseq drops when its size is not a multiple of --required-batch-size-multiple."""

from __future__ import annotations

import functools
import inspect
from typing import Callable, List, Sequence

import numpy as np
from fairseq.data import data_utils

from .fix import FairseqFix


def keeping_every_index(batch_by_size: Callable) -> Callable:
    """``batch_by_size`` that returns one more batch holding every index its batches left out
    (in their given order); fixed-shape batching (``fixed_shapes``) is passed through unchanged,
    since fairseq drops nothing there and a batch of another shape would break the fixed shapes."""

    signature = inspect.signature(batch_by_size)

    @functools.wraps(batch_by_size)
    def wrapper(indices, *args, **kwargs) -> List[Sequence[int]]:
        if not isinstance(indices, np.ndarray):
            indices = np.fromiter(indices, dtype=np.int64, count=-1)
        batches = batch_by_size(indices, *args, **kwargs)
        if signature.bind(indices, *args, **kwargs).arguments.get("fixed_shapes") is not None:
            return batches
        covered = np.concatenate(batches) if len(batches) else np.zeros(0, dtype=np.int64)
        missing = indices[~np.isin(indices, covered)]
        return list(batches) + [missing] if len(missing) else batches

    return wrapper


class KeepLastBatch(FairseqFix):
    """fairseq's ``data_utils.batch_by_size`` drops the last batch when its size is not a
    multiple of ``--required-batch-size-multiple`` (default 8). Batches are made from the
    length-sorted indices, so that batch holds the *longest* sentences: fairseq-train never
    trains on them and fairseq-generate never translates them. The fix keeps fairseq's batches
    and appends the left-out indices as one more batch, so every index is in exactly one batch."""

    name = "batch_by_size"
    issues = ("facebookresearch/fairseq#5036", "facebookresearch/fairseq#5351")
    patches = ("fairseq.data.data_utils.batch_by_size",)

    def apply(self) -> None:
        data_utils.batch_by_size = keeping_every_index(data_utils.batch_by_size)
