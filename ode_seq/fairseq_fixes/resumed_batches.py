"""A run resumed at epoch k trains on the batches of the run it continues."""

from __future__ import annotations

import functools
import inspect
from typing import Callable

from fairseq.data import iterators
from fairseq.tasks.fairseq_task import FairseqTask

from .fix import FairseqFix


def batches_of_epoch_one(get_batch_iterator: Callable) -> Callable:
    """``get_batch_iterator`` whose first reusable iterator, asked for at any epoch k, holds the
    batches of epoch 1 (sentences grouped under ``numpy_seed(seed + 1)``) and starts at epoch k; each
    epoch's batch order still follows ``seed + epoch``. Iterators rebuilt every epoch (sharded data,
    ``--rebuild-batches``, ``update_epoch_batch_itr``, no iterator cache) are fairseq's as they are."""

    signature = inspect.signature(get_batch_iterator)

    @functools.wraps(get_batch_iterator)
    def wrapper(task: FairseqTask, *args, **kwargs) -> iterators.EpochBatchIterator:
        bound = signature.bind(task, *args, **kwargs)
        bound.apply_defaults()
        call, epoch, dataset = bound.arguments, bound.arguments["epoch"], bound.arguments["dataset"]
        reused = not call["disable_iterator_cache"] and not call["update_epoch_batch_itr"]
        frozen = reused and task.can_reuse_epoch_itr(dataset) and not getattr(task.cfg, "rebuild_batches", False)
        if not frozen or epoch <= 1 or dataset in task.dataset_to_epoch_iter:
            return get_batch_iterator(*bound.args, **bound.kwargs)
        call["epoch"] = 1
        epoch_iterator = get_batch_iterator(*bound.args, **bound.kwargs)
        epoch_iterator.epoch = epoch
        dataset.set_epoch(epoch)
        return epoch_iterator

    return wrapper


class ResumedBatches(FairseqFix):
    """fairseq's ``FairseqTask.get_batch_iterator`` groups sentences into batches once, shuffled
    under ``seed + epoch`` and sorted by length (ties keep the shuffled order), and caches the
    iterator: an uninterrupted run keeps epoch 1's batches for every epoch and only reorders them.
    A run resumed from a checkpoint of epoch k builds its iterator afresh with ``seed + k``: other
    batches from then on, so it does not continue the run it resumes (for a language model with
    equal-length blocks, nearly every batch differs), and a resume in the middle of epoch k ≥ 2
    skips the first batches of the new grouping, training some sentences twice that epoch and
    others not at all. The fix builds that first iterator with epoch 1's batches, so a resumed run
    trains on the same batches in the same order as the uninterrupted one. Left as fairseq has it:
    ``--update-ordered-indices-seed``, whose seed the trainer already moves with the epoch."""

    name = "resumed_batches"
    patches = ("fairseq.tasks.fairseq_task.FairseqTask.get_batch_iterator",)

    def apply(self) -> None:
        FairseqTask.get_batch_iterator = batches_of_epoch_one(FairseqTask.get_batch_iterator)
