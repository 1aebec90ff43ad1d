"""Checkpoint files: loaded with torch's ``weights_only`` unpickler, written atomically.

fairseq checkpoints hold tensors, plain containers and the training ``argparse.Namespace``.
Only those are allow-listed; any other pickled global is refused, so a hostile checkpoint
cannot run code. Safe loading is never switched off. Files are checked first: a truncated
archive or a member failing its CRC is reported with the file's name, never loaded silently.
A checkpoint is written under a temporary name and renamed, so it appears complete or not at all.
"""

from __future__ import annotations

import argparse
import os
import pickle
import re
import zipfile
from typing import Any, Dict

import torch

from ode_seq.output_files import explaining_full_disk

FAIRSEQ_CHECKPOINT_TYPES = [argparse.Namespace]


def allow_fairseq_checkpoint_types() -> None:
    """Allow-list the non-tensor types fairseq writes into checkpoints."""
    torch.serialization.add_safe_globals(FAIRSEQ_CHECKPOINT_TYPES)


def verify_checkpoint_file(path: str) -> None:
    """ValueError naming ``path`` when it is a directory, not a complete checkpoint archive or
    fails a CRC."""
    if os.path.isdir(path):
        raise ValueError(
            f"{path} is a directory, not a checkpoint file: name a file in it, e.g. "
            f"{os.path.join(path, 'checkpoint_best.pt')}"
        )
    if not zipfile.is_zipfile(path):
        with open(path, "rb") as f:
            if f.read(1) == b"\x80":  # a legacy (pre-zip) torch.save: a bare pickle stream
                return
        raise ValueError(
            f"{path} is truncated or corrupted (not a complete checkpoint archive), e.g. a copy "
            "interrupted by a crash; load another checkpoint"
        )
    with zipfile.ZipFile(path) as archive:
        bad = archive.testzip()
    if bad is not None:
        raise ValueError(
            f"{path} is corrupted: its member {bad} fails its CRC check; load another checkpoint or copy this one again"
        )


def unpickling_refusal(path: str, error: Exception) -> ValueError:
    """The ValueError for a refused pickled global: file, type, and the advice."""
    found = re.search(r"GLOBAL ([\w.]+)", str(error))
    kind = found.group(1) if found else "object"
    return ValueError(
        f"refusing to load {path}: it contains a pickled {kind}, which is not a tensor or a "
        "fairseq checkpoint type; only load checkpoints you trust"
    )


def load_checkpoint(path: str) -> Dict[str, Any]:
    """torch.load(path) with safe loading; problems raise ValueError naming file and cause."""
    allow_fairseq_checkpoint_types()
    verify_checkpoint_file(path)
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as error:
        raise unpickling_refusal(path, error) from None


# fairseq's placeholder buffer (``torch.FloatTensor(1)``, never initialised: whatever the memory
# held, inf and nan included) that modules such as AdaptiveInput keep only for its dtype and device.
PLACEHOLDER_BUFFER = "_float_tensor"


def check_finite_parameters(path: str, parameters: Dict[str, Any]) -> None:
    """ValueError naming ``path`` and the first floating-point tensor holding inf or nan (fairseq's
    uninitialised placeholder buffers aside)."""
    for name, value in parameters.items():
        if name.rpartition(".")[2] == PLACEHOLDER_BUFFER:
            continue
        if torch.is_tensor(value) and value.is_floating_point() and not torch.isfinite(value).all():
            bad = int((~torch.isfinite(value)).sum())
            raise ValueError(
                f"{path} holds non-finite parameters: {bad} of {value.numel()} values of {name} "
                "are inf or nan (training diverged before this checkpoint was saved), so every "
                "score and translation computed from it would be nan or arbitrary; use an earlier "
                "checkpoint"
            )


class _ByteCounter:
    """A file-like sink that only counts what is written to it."""

    def __init__(self) -> None:
        self.size = 0

    def write(self, data: bytes) -> int:
        self.size += len(data)
        return len(data)

    def flush(self) -> None:
        pass


def serialized_size(state: Dict[str, Any]) -> int:
    """The bytes torch.save(state) writes, counted without writing them anywhere."""
    counter = _ByteCounter()
    torch.save(state, counter)
    return counter.size


def save_checkpoint(state: Dict[str, Any], path: str) -> None:
    """torch.save(state) to a temporary name next to ``path``, then renamed to ``path``; a failed
    write leaves neither, and one for want of space raises OutputWriteError with the space needed."""
    tmp = f"{path}.tmp{os.getpid()}"
    with explaining_full_disk(path, lambda: serialized_size(state)):
        try:
            torch.save(state, tmp)
            os.replace(tmp, path)
        except BaseException:
            if os.path.exists(tmp):
                os.remove(tmp)
            raise
