"""Binarised data files (``.idx``/``.bin``) checked against each other when fairseq opens them."""

from __future__ import annotations

import functools
import os
import struct
from typing import Callable

from fairseq.data.indexed_dataset import MMapIndexedDataset, data_file_path, index_file_path

from .fix import FairseqFix

# fairseq 0.12's MMapIndexedDataset index: magic (9 bytes), version <Q, dtype code <B, count n <Q,
# then n int32 sizes and n int64 pointers (byte offsets into the .bin file).
HEADER = struct.Struct("<9sQBQ")
ENTRY_BYTES = 4 + 8
REBINARISE = "binarise the data again (fairseq-preprocess) or copy the file again from where it was made"


def check_index_file(path: str) -> None:
    """ValueError naming ``path`` when the index is shorter than its header says (a cut copy)."""
    size = os.path.getsize(path)
    with open(path, "rb") as index:
        header = index.read(HEADER.size)
    if len(header) < HEADER.size or not header.startswith(MMapIndexedDataset.Index._HDR_MAGIC):
        return  # fairseq's own check names the wrong format
    count = HEADER.unpack(header)[3]
    expected = HEADER.size + count * ENTRY_BYTES
    if size < expected:
        raise ValueError(
            f"{path} is cut short: it has {size} bytes, but its header lists {count} samples, which take "
            f"{expected} bytes; {REBINARISE}"
        )


def check_data_file(prefix: str, index: MMapIndexedDataset.Index) -> None:
    """ValueError naming the ``.bin`` file of ``prefix`` when it ends before the last sample its
    ``index`` lists."""
    if len(index) == 0:
        return
    expected = int(index._pointers[-1]) + int(index._sizes[-1]) * index.dtype().itemsize
    path = data_file_path(prefix)
    size = os.path.getsize(path)
    if size < expected:
        raise ValueError(
            f"{path} is cut short: it has {size} bytes, but its index {index_file_path(prefix)} lists "
            f"{len(index)} samples, which end at byte {expected}; {REBINARISE}"
        )


def checked_init(init: Callable) -> Callable:
    """``MMapIndexedDataset._do_init`` that checks the index and the data file against each other."""

    @functools.wraps(init)
    def checked(self, path: str) -> None:
        check_index_file(index_file_path(path))
        init(self, path)
        check_data_file(path, self._index)

    return checked


class IndexedDataSizes(FairseqFix):
    """fairseq reads a binarised data file cut short (an interrupted copy or download) until a batch
    reaches the missing part, then stops with ``ValueError: offset must be non-negative and no
    greater than buffer length (N)``, naming no file (training may run for hours before it gets
    there). The fix: opening an ``MMapIndexedDataset`` compares the ``.idx`` file with the count of
    its header and the ``.bin`` file with the end of the last sample its index lists, and refuses a
    short file naming it, its size, the size expected and how to make it again."""

    name = "indexed_data_sizes"
    patches = ("fairseq.data.indexed_dataset.MMapIndexedDataset._do_init",)
    changes_working_runs = False

    def apply(self) -> None:
        MMapIndexedDataset._do_init = checked_init(MMapIndexedDataset._do_init)
