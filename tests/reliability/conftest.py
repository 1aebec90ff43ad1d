"""Shared fixtures: one binarised corpus and one uninterrupted RK4 training run per session.

In-process models run torch on one thread, as the tools do (``OMP_NUM_THREADS=1``): the models
are tiny, and thread hand-offs on a busy machine cost far more than the arithmetic.
"""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from tests.e2e.cli import run
from tests.reliability.corpus import preprocess, resumable_training, write_reversal_corpus


@pytest.fixture(autouse=True)
def single_torch_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="session")
def data_bin(tmp_path_factory) -> Path:
    raw = tmp_path_factory.mktemp("raw")
    write_reversal_corpus(raw)
    preprocess(raw, raw / "bin")
    return raw / "bin"


@pytest.fixture(scope="session")
def reference_run(data_bin, tmp_path_factory):
    """The uninterrupted run: its save directory and its log."""
    save = tmp_path_factory.mktemp("uninterrupted")
    out = run("fairseq-train", resumable_training(data_bin, save))
    return save, out.stdout
