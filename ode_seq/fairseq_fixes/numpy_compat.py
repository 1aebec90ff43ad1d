"""fairseq's ``np.compat.long`` under numpy 2."""

from __future__ import annotations

import types

import numpy as np
from fairseq.data import language_pair_dataset, token_block_dataset

from .fix import FairseqFix


class NumpyWithCompatLong(types.ModuleType):
    """numpy, plus the ``np.compat.long`` of numpy 1 (Python's int, i.e. int64 as a dtype)."""

    def __init__(self) -> None:
        super().__init__(np.__name__)
        self.compat = types.SimpleNamespace(long=np.int64)

    def __getattr__(self, name: str):
        return getattr(np, name)


class NumpyCompatLong(FairseqFix):
    """fairseq 0.12 spells the int64 dtype ``np.compat.long``, which numpy 2.0 removed, so
    ``TokenBlockDataset`` with break mode ``eos`` stops with AttributeError: ``fairseq-interactive``
    and the hub interface of every language model (their inference dataset), and
    ``--sample-break-mode eos`` in ``fairseq-train``/``fairseq-eval-lm``/``fairseq-generate``
    (``LanguagePairDataset``'s ``num_tokens_vec`` likewise). The fix gives those two fairseq
    modules a numpy that has ``compat.long`` = int64; numpy itself is left unchanged. No upstream
    report found; fairseq's main branch still has the line."""

    name = "numpy_compat_long"
    patches = ("fairseq.data.token_block_dataset.np", "fairseq.data.language_pair_dataset.np")
    changes_working_runs = False

    def apply(self) -> None:
        if hasattr(np, "compat"):
            return
        patched = NumpyWithCompatLong()
        for module in (token_block_dataset, language_pair_dataset):
            module.np = patched
