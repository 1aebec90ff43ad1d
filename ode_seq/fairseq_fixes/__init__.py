"""Fixes to fairseq 0.12 behaviour that would silently lose a user's data or stop a CPU run.

Each fix is a named :class:`~.fix.FairseqFix` in a module of its own, whose docstring states
fairseq's bug, the upstream issue and the fix. :func:`apply_fixes` (called by ``user_dir``)
applies them once per process and logs which, naming those that change runs of any architecture;
it refuses a fairseq version they were not written for. No two fixes patch the same fairseq object
(:func:`fix_registry` refuses it), so they apply in any order. Switch fixes off with the
environment variable ``ODE_SEQ_DISABLE_FIXES``, a comma-separated list of fix names
(``ODE_SEQ_DISABLE_FIXES=batch_by_size,ngram_blocking``) or ``all``.
"""

from __future__ import annotations

import logging
import os
from typing import Dict, List, Optional, Sequence

import fairseq

from .atomic_checkpoint_copy import AtomicCheckpointCopy
from .bf16_without_tpu import Bf16WithoutTPU
from .checkpoint_loading import CheckpointLoading
from .cpu_ddp import CPUDistributedDataParallel
from .eval_lm_inputs import EvalLMInputs
from .fix import FairseqFix
from .fp16_on_cpu import FP16FlatGradsOnCPU
from .full_disk_save import FullDiskSave
from .indexed_data import IndexedDataSizes
from .interactive_input import InteractiveInput
from .last_batch import KeepLastBatch
from .model_loading import ModelLoading
from .ngram_blocking import NGramBlocking
from .numpy_compat import NumpyCompatLong
from .patience import PatienceAcrossResume
from .preprocess_hint import PreprocessHint
from .restore_file import RestoreFileMustExist
from .resumed_batches import ResumedBatches
from .resumed_data import ResumedData
from .save_dir import SaveDirHint
from .save_dir_lock import SaveDirLock
from .torchrun import TorchrunLaunch

# fairseq 0.12.2 (PyPI), ve-fairseq 0.12.3 and fairseq-fixed 0.12.3.1 are one code line: the
# 0.12.2 release rebuilt for newer Pythons, without changes to the patched functions.
SUPPORTED_FAIRSEQ_VERSIONS = ("0.12.2", "0.12.3", "0.12.3.1")
DISABLE_VARIABLE = "ODE_SEQ_DISABLE_FIXES"


def fix_registry(fixes: Sequence[FairseqFix]) -> Dict[str, FairseqFix]:
    """The fixes by name; ValueError when two share a name or patch the same fairseq object."""
    registry: Dict[str, FairseqFix] = {}
    patched_by: Dict[str, str] = {}
    for fix in fixes:
        if fix.name in registry:
            raise ValueError(f"two fairseq fixes are named {fix.name}")
        for target in fix.patches:
            if target in patched_by:
                raise ValueError(
                    f"fairseq fixes {patched_by[target]} and {fix.name} both patch {target}: each "
                    "fairseq object may be replaced by one fix only, so that fixes apply in any order"
                )
            patched_by[target] = fix.name
        registry[fix.name] = fix
    return registry


FIXES: Dict[str, FairseqFix] = fix_registry(
    (
        KeepLastBatch(),
        NGramBlocking(),
        CheckpointLoading(),
        AtomicCheckpointCopy(),
        CPUDistributedDataParallel(),
        Bf16WithoutTPU(),
        PreprocessHint(),
        RestoreFileMustExist(),
        SaveDirHint(),
        ModelLoading(),
        TorchrunLaunch(),
        FP16FlatGradsOnCPU(),
        InteractiveInput(),
        NumpyCompatLong(),
        SaveDirLock(),
        FullDiskSave(),
        ResumedData(),
        PatienceAcrossResume(),
        ResumedBatches(),
        EvalLMInputs(),
        IndexedDataSizes(),
    )
)

logger = logging.getLogger(__name__)
_applied: Optional[List[str]] = None


def disabled_fixes(setting: str) -> List[str]:
    """The fix names in an ``ODE_SEQ_DISABLE_FIXES`` value ("" for none, "all" for every one)."""
    names = [name.strip() for name in setting.split(",") if name.strip()]
    if names == ["all"]:
        return list(FIXES)
    unknown = [name for name in names if name not in FIXES]
    if unknown:
        raise ValueError(
            f"{DISABLE_VARIABLE} names unknown fixes {', '.join(unknown)}; the fixes are: {', '.join(FIXES)} (or all)"
        )
    return names


def check_fairseq_version(version: str) -> None:
    if version not in SUPPORTED_FAIRSEQ_VERSIONS:
        raise RuntimeError(
            f"ode-seq's fixes to fairseq were written for fairseq "
            f"{', '.join(SUPPORTED_FAIRSEQ_VERSIONS)}, but fairseq {version} is installed: install "
            f"the pinned version (pip install --no-deps -r requirements-fairseq.txt), or set "
            f"{DISABLE_VARIABLE}=all to run without the fixes"
        )


def applied_fixes_line(applied: Sequence[str], disabled: Sequence[str]) -> str:
    """What the log says: the fixes applied, those of them that change runs of any architecture
    (:attr:`FairseqFix.changes_working_runs`), and those switched off."""
    changing = [name for name in applied if FIXES[name].changes_working_runs]
    return (
        f"applied fixes {', '.join(applied) or 'none'}"
        + (f"; these change runs of any architecture, ODE or not: {', '.join(changing)}" if changing else "")
        + (f" ({DISABLE_VARIABLE} switched off {', '.join(disabled)})" if disabled else "")
    )


def apply_fixes() -> List[str]:
    """Apply every fix not switched off, once per process; returns the names applied."""
    global _applied
    if _applied is None:
        disabled = disabled_fixes(os.environ.get(DISABLE_VARIABLE, ""))
        chosen = [name for name in FIXES if name not in disabled]
        if chosen:
            check_fairseq_version(fairseq.__version__)
        for name in chosen:
            FIXES[name].apply()
        _applied = chosen
        logger.info("fairseq %s: %s", fairseq.__version__, applied_fixes_line(chosen, disabled))
    return list(_applied)


__all__ = ["DISABLE_VARIABLE", "FIXES", "FairseqFix", "apply_fixes", "disabled_fixes", "fix_registry"]
