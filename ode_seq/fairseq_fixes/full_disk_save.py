"""A checkpoint save that runs out of space says what failed, what is intact and what it needs."""

from __future__ import annotations

import functools
import os
import re
from typing import Callable, List, Set

from fairseq import checkpoint_utils

from ode_seq.checkpoint_files import serialized_size, verify_checkpoint_file
from ode_seq.output_files import OutputWriteError, format_size, out_of_space

from .fix import FairseqFix

TEMPORARY = re.compile(r"\.tmp\d*$")  # fairseq's FILE.tmp and the atomic copies' FILE.tmp<pid>
LAST = "checkpoint_last.pt"


def _listing(directory: str) -> Set[str]:
    return set(os.listdir(directory)) if os.path.isdir(directory) else set()


def remove_new_temporaries(directory: str, before: Set[str]) -> List[str]:
    """Delete the temporary files that appeared in ``directory`` since ``before``; returns the
    complete files that appeared."""
    new = sorted(_listing(directory) - before)
    for name in new:
        if TEMPORARY.search(name):
            os.remove(os.path.join(directory, name))
    return [name for name in new if not TEMPORARY.search(name)]


def intact_checkpoints(directory: str, new: List[str]) -> str:
    """What a failed save left for resuming, checked: checkpoint_last.pt and the files it completed."""
    last = os.path.join(directory, LAST)
    if not os.path.isfile(last):
        said = f"{directory} held no {LAST} yet, so a restart trains from the start"
    else:
        verify_checkpoint_file(last)
        said = f"the previous {LAST} is intact (complete, and it passes its CRC check); a restart resumes from it"
    return said + (f"; this save completed {', '.join(new)}" if new else "")


def reporting_full_disk(save: Callable) -> Callable:
    """fairseq's ``save_checkpoint`` whose failure for want of space removes its temporary files
    and raises OutputWriteError saying what failed, what is intact, and the space a save needs:
    the checkpoint and a temporary copy of it (for checkpoint_last.pt or checkpoint_best.pt)."""

    @functools.wraps(save)
    def save_checkpoint(cfg, trainer, epoch_itr, val_loss):
        before = _listing(cfg.save_dir)
        try:
            return save(cfg, trainer, epoch_itr, val_loss)
        except (OSError, RuntimeError) as error:
            new = remove_new_temporaries(cfg.save_dir, before)
            size = serialized_size(trainer.state_dict())
            reason = out_of_space(error, os.path.abspath(cfg.save_dir), size, 2 * size)
            if reason is None:
                raise
            raise OutputWriteError(
                f"saving the checkpoint of epoch {epoch_itr.epoch} @ {trainer.get_num_updates()} updates "
                f"({format_size(size)}) into {cfg.save_dir} failed: {reason}. Nothing half-written was "
                f"left: {intact_checkpoints(cfg.save_dir, new)}. Run the same command again once there is space"
            ) from error

    return save_checkpoint


class FullDiskSave(FairseqFix):
    """When the disk fills up (or the file size limit is reached) while fairseq-train saves a
    checkpoint, fairseq retries the write, then stops with a torch RuntimeError such as
    "PytorchStreamWriter failed writing file data/12: file write failed" (or "unexpected pos") that
    names neither the file nor the cause, and leaves the half-written ``checkpoint….pt.tmp`` (or
    a temporary copy) behind, taking the space. The fix: the save's temporary files are removed
    and the error says what failed (the limit or the free space, in bytes), that the previous
    checkpoint_last.pt is intact (checked), and the space a save needs."""

    name = "full_disk_save"
    patches = ("fairseq.checkpoint_utils.save_checkpoint",)
    changes_working_runs = False

    def apply(self) -> None:
        checkpoint_utils.save_checkpoint = reporting_full_disk(checkpoint_utils.save_checkpoint)
