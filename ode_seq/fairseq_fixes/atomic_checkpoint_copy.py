"""Copies of checkpoints that appear complete or not at all."""

from __future__ import annotations

import os

from fairseq.file_io import PathManager

from .fix import ReplacementFix


class AtomicCopyPathManager(PathManager):
    """fairseq's PathManager whose local copies go to a temporary name, then are renamed."""

    @staticmethod
    def copy(src_path: str, dst_path: str, overwrite: bool = False) -> bool:
        if not (os.path.exists(src_path) and os.path.isdir(os.path.dirname(dst_path) or ".")):
            return PathManager.copy(src_path, dst_path, overwrite)
        tmp = f"{dst_path}.tmp{os.getpid()}"
        ok = PathManager.copy(src_path, tmp, overwrite=True)
        os.replace(tmp, dst_path)
        return ok


class AtomicCheckpointCopy(ReplacementFix):
    """fairseq's ``save_checkpoint`` writes checkpoint_last.pt, checkpoint_best.pt, … by copying
    the newest checkpoint over them in place: a crash during the copy leaves a truncated file
    that the next run fails to resume from. The fix: checkpoint_utils uses a PathManager subclass
    whose copies go to a temporary name and are renamed when complete."""

    name = "atomic_checkpoint_copy"
    issues = ("facebookresearch/fairseq#2684",)
    patches = ("fairseq.checkpoint_utils.PathManager",)
    replacement = AtomicCopyPathManager
    changes_working_runs = False
