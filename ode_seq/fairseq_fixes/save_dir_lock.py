"""One training per save directory: a second training on a --save-dir in use is refused."""

from __future__ import annotations

import functools
import os
from argparse import Namespace
from typing import Callable, Collection, Dict, FrozenSet

from fairseq.dataclass.utils import convert_namespace_to_omegaconf
from fairseq.distributed import utils as distributed_utils
from fairseq.trainer import Trainer

from ode_seq.output_files import lock_holder, take_lock

from .fix import FairseqFix

LOCK_FILE = ".fairseq-train.lock"
_held: Dict[str, int] = {}  # real path of a save directory -> descriptor of its lock file


def _close_inherited_locks() -> None:
    """In a forked child (a data loader worker): drop the copies of the parent's lock descriptors,
    so that only the training process holds the lock (closing a copy does not release it)."""
    for descriptor in _held.values():
        os.close(descriptor)
    _held.clear()


os.register_at_fork(after_in_child=_close_inherited_locks)


def lock_save_dir(save_dir: str) -> None:
    """Hold the lock of SAVE_DIR/.fairseq-train.lock (:func:`ode_seq.output_files.take_lock`) for
    the rest of this process's life. ValueError naming the save directory and the holder's process
    id when another process holds it. Taking it again in the same process does nothing."""
    key = os.path.realpath(save_dir)
    if key in _held:
        return
    path = os.path.join(save_dir, LOCK_FILE)
    descriptor = take_lock(path)
    if descriptor is None:
        raise ValueError(
            f"--save-dir {save_dir} is in use by another training (process {lock_holder(path)}, which holds "
            f"{path}); two trainings in one save directory overwrite each other's checkpoints. "
            "Wait until it ends or stop it, or give this training another --save-dir (nothing was trained)"
        )
    _held[key] = descriptor


def locked_save_dirs() -> FrozenSet[str]:
    """The save directories (real paths) whose locks this process holds."""
    return frozenset(_held)


def release_save_dir_locks(keep: Collection[str] = ()) -> None:
    """Release the locks this process holds but those of ``keep`` (real paths), as the process's
    exit does: for a caller that runs fairseq-train's entry point more than once in one process."""
    for key in set(_held) - set(keep):
        os.close(_held.pop(key))


def locking_save_dir(init: Callable) -> Callable:
    """``Trainer.__init__`` that first locks the save directory: on the data-parallel rank 0 only
    (the rank that writes checkpoints), in a save directory that exists (fairseq-train creates it
    at start-up, before the Trainer) and unless --no-save."""

    @functools.wraps(init)
    def __init__(self, cfg, *args, **kwargs) -> None:
        if isinstance(cfg, Namespace):
            cfg = convert_namespace_to_omegaconf(cfg)
        checkpoint = cfg.checkpoint
        if (
            not checkpoint.no_save
            and distributed_utils.is_master(cfg.distributed_training)
            and os.path.isdir(checkpoint.save_dir)
        ):
            lock_save_dir(checkpoint.save_dir)
        init(self, cfg, *args, **kwargs)

    return __init__


class SaveDirLock(FairseqFix):
    """Two fairseq-train runs started on one --save-dir (a repeated command, a second job on a
    shared disk) both train and write checkpoint_last.pt, checkpoint_best.pt and the epoch
    checkpoints in turn: each resumes from, and overwrites, the other's. The fix: the Trainer of
    the rank that saves holds a lock on a file in the save directory for the life of its process,
    and a second training is refused naming the save directory and the first one's process."""

    name = "save_dir_lock"
    patches = ("fairseq.trainer.Trainer.__init__",)
    changes_working_runs = False

    def apply(self) -> None:
        Trainer.__init__ = locking_save_dir(Trainer.__init__)
