"""An error for a --save-dir that cannot hold checkpoints that says which option to change."""

from __future__ import annotations

import functools
from typing import Callable

from fairseq import checkpoint_utils

from .fix import FairseqFix


def naming_save_dir(verify: Callable) -> Callable:
    """fairseq's ``verify_checkpoint_directory`` whose OSError names --save-dir and the fix."""

    @functools.wraps(verify)
    def verify_save_dir(save_dir: str) -> None:
        try:
            verify(save_dir)
        except OSError as error:
            raise ValueError(
                f"--save-dir {save_dir} cannot hold checkpoints ({error.strerror}: {error.filename}); "
                "pass a writable directory as --save-dir (nothing was trained)"
            ) from None

    return verify_save_dir


class SaveDirHint(FairseqFix):
    """fairseq-train checks at start-up that --save-dir takes a file, but a path that is a file,
    lies under a file or is not writable ends in a bare OSError about a ``dummy`` file fairseq
    made up (after a log line). The fix: the check's error names --save-dir and what to do."""

    name = "save_dir"
    patches = ("fairseq.checkpoint_utils.verify_checkpoint_directory",)
    changes_working_runs = False

    def apply(self) -> None:
        checkpoint_utils.verify_checkpoint_directory = naming_save_dir(checkpoint_utils.verify_checkpoint_directory)
