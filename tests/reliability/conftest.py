"""Shared fixtures: one uninterrupted RK4 training run on the binarised corpus (tests/conftest.py)
and one prepared slice of the Bible corpus per session.

In-process models run torch on one thread (or ``ODE_SEQ_TEST_THREADS``), as the tools do
(``OMP_NUM_THREADS=1``): the models are tiny, and thread hand-offs on a busy machine cost far more
than the arithmetic.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from testkit.in_process import run_in_process
from tests.conftest import fixed_torch_threads
from tests.reliability.corpus import resumable_training
from tests.reliability.process_tree import PREPARE_ARGS, TRANSLATION, pipeline_env

fixed_threads = pytest.fixture(autouse=True)(fixed_torch_threads)


@pytest.fixture(scope="session")
def reference_run(data_bin, tmp_path_factory):
    """The uninterrupted run: its save directory and its log."""
    save = tmp_path_factory.mktemp("uninterrupted")
    out = run_in_process("fairseq-train", resumable_training(data_bin, save), check=True)
    return save, out.stdout


@pytest.fixture(scope="session")
def prepared_bible(tmp_path_factory) -> Path:
    """A work dir of prepare_bible.sh on the tiny slice (process_tree.PREPARE_ARGS); copy it, never change it."""
    work = tmp_path_factory.mktemp("prepared-bible")
    result = subprocess.run(
        [str(TRANSLATION / "prepare_bible.sh"), "--work-dir", str(work), *PREPARE_ARGS],
        capture_output=True,
        text=True,
        env=pipeline_env(),
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return work


@pytest.fixture
def bible_work(prepared_bible, tmp_path) -> Path:
    """A private copy of the prepared work dir."""
    work = tmp_path / "work"
    shutil.copytree(prepared_bible, work, symlinks=True)
    return work
