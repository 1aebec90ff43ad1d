"""Errors for a data directory without a dictionary or a split that say how to make one."""

from __future__ import annotations

import functools
from typing import Callable

from fairseq.tasks.translation import TranslationTask

from .fix import FairseqFix

PREPROCESS_HINT = (
    "; fairseq-preprocess writes dict.{src,tgt}.txt and {split}.{src}-{tgt}.{src,tgt}.{bin,idx} "
    "into the data directory (e.g. fairseq-preprocess --trainpref ... --validpref ... --destdir DIR)"
)


def hinting(load: Callable) -> Callable:
    """``load`` whose FileNotFoundError gains ``PREPROCESS_HINT``."""

    @functools.wraps(load)
    def hinted(*args, **kwargs):
        try:
            return load(*args, **kwargs)
        except FileNotFoundError as error:
            if "fairseq-preprocess" in str(error):
                raise
            raise FileNotFoundError(f"{error}{PREPROCESS_HINT}") from None

    return hinted


class PreprocessHint(FairseqFix):
    """fairseq's translation task fails on a data directory missing a dictionary or a split
    with a bare FileNotFoundError or "Dataset not found", which does not say how such a
    directory is made. The fix: the errors of the task's ``setup_task`` and ``load_dataset``
    (in fairseq's TranslationTask, so every task derived from it) add which files
    fairseq-preprocess writes."""

    name = "preprocess_hint"
    issues = ("facebookresearch/fairseq#2831",)
    patches = (
        "fairseq.tasks.translation.TranslationTask.setup_task",
        "fairseq.tasks.translation.TranslationTask.load_dataset",
    )
    changes_working_runs = False

    def apply(self) -> None:
        TranslationTask.setup_task = classmethod(hinting(TranslationTask.setup_task.__func__))
        TranslationTask.load_dataset = hinting(TranslationTask.load_dataset)
