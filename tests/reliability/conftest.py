"""Shared fixtures: one binarised corpus and one uninterrupted RK4 training run per session.

In-process models run torch on one thread (or ``ODE_SEQ_TEST_THREADS``), as the tools do
(``OMP_NUM_THREADS=1``): the models are tiny, and thread hand-offs on a busy machine cost far more
than the arithmetic.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import fixed_torch_threads
from tests.e2e.cli import run
from tests.e2e.corpus import preprocess, write_reversal_corpus
from tests.reliability.corpus import resumable_training

fixed_threads = pytest.fixture(autouse=True)(fixed_torch_threads)


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
