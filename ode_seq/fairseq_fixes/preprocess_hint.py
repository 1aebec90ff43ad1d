"""Errors for a data directory without a dictionary or a split that say how to make one."""

from __future__ import annotations

import contextlib
from typing import Iterator

from fairseq.tasks import TASK_REGISTRY
from fairseq.tasks.translation import TranslationTask

from .fix import FairseqFix

PREPROCESS_HINT = (
    "; fairseq-preprocess writes dict.{src,tgt}.txt and {split}.{src}-{tgt}.{src,tgt}.{bin,idx} "
    "into the data directory (e.g. fairseq-preprocess --trainpref ... --validpref ... --destdir DIR)"
)


@contextlib.contextmanager
def preprocess_hint() -> Iterator[None]:
    """A FileNotFoundError raised inside gains ``PREPROCESS_HINT``."""
    try:
        yield
    except FileNotFoundError as error:
        if "fairseq-preprocess" in str(error):
            raise
        raise FileNotFoundError(f"{error}{PREPROCESS_HINT}") from None


class HintingTranslationTask(TranslationTask):
    """fairseq's translation task whose missing-file errors name what fairseq-preprocess writes."""

    @classmethod
    def setup_task(cls, cfg, **kwargs):
        with preprocess_hint():
            return super().setup_task(cfg, **kwargs)

    def load_dataset(self, split, epoch=1, combine=False, **kwargs):
        with preprocess_hint():
            return super().load_dataset(split, epoch, combine, **kwargs)


class PreprocessHint(FairseqFix):
    """fairseq's translation task fails on a data directory missing a dictionary or a split
    with a bare FileNotFoundError or "Dataset not found", which does not say how such a
    directory is made. The fix: the task registered as ``translation`` is a subclass whose
    errors add which files fairseq-preprocess writes."""

    name = "preprocess_hint"
    issues = ("facebookresearch/fairseq#2831",)

    def apply(self) -> None:
        TASK_REGISTRY["translation"] = HintingTranslationTask
