"""One pipeline run at a time in a directory (examples/lib.sh, lock_dir): a second run on a work dir
that a run uses is refused, naming the directory and the other run's PID; the kernel releases the
lock when the run ends however it ends, so a killed run's rerun goes ahead; the stages a run starts
share its lock.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = REPO_ROOT / "examples"
LIB = shlex.quote(str(EXAMPLES / "lib.sh"))


def lib_script(*lines: str) -> List[str]:
    """A bash command that runs LINES after sourcing examples/lib.sh under the pipelines' strict mode."""
    return ["bash", "-c", "\n".join(["set -euo pipefail", f"source {LIB}", *lines]), "probe.sh"]


def holder(directory: Path, *then: str) -> subprocess.Popen:
    """A run (in a process group of its own) that locks DIRECTORY, says so, then does THEN or waits."""
    process = subprocess.Popen(
        lib_script(f"lock_dir {shlex.quote(str(directory))}", "echo locked", *(then or ["sleep 120"])),
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    assert process.stdout.readline().strip() == "locked"
    return process


def second_run(directory: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        lib_script(f"lock_dir {shlex.quote(str(directory))}", "echo ran"), capture_output=True, text=True, timeout=60
    )


def stop(process: subprocess.Popen) -> None:
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def test_a_second_run_on_a_held_directory_is_refused_naming_the_first(tmp_path):
    first = holder(tmp_path / "work")
    try:
        (tmp_path / "work" / "output.txt").write_text("the first run's\n")
        refused = second_run(tmp_path / "work")
        assert refused.returncode == 1 and "ran" not in refused.stdout
        assert f"probe.sh: error: {tmp_path / 'work'} is in use by another run (PID {first.pid}, probe.sh, started" in (
            refused.stderr
        )
        assert "wait until it ends, or stop it, and rerun" in refused.stderr
        assert (tmp_path / "work" / "output.txt").read_text() == "the first run's\n"
    finally:
        stop(first)


def test_a_killed_runs_lock_does_not_block_the_rerun(tmp_path):
    first = holder(tmp_path / "work")
    stop(first)
    rerun = second_run(tmp_path / "work")
    assert rerun.returncode == 0, rerun.stderr
    assert rerun.stdout == "ran\n"


def test_a_run_that_ended_normally_leaves_the_directory_free(tmp_path):
    first = holder(tmp_path / "work", "true")
    assert first.wait(timeout=60) == 0
    assert second_run(tmp_path / "work").returncode == 0


def test_the_stages_a_run_starts_share_its_lock(tmp_path):
    stage = lib_script(f"lock_dir {shlex.quote(str(tmp_path / 'work'))}", "echo stage ran")
    first = holder(tmp_path / "work", " ".join(map(shlex.quote, stage)))
    assert first.stdout.read() == "stage ran\n"
    assert first.wait(timeout=60) == 0
    first.stdout.close()


def test_a_process_left_by_a_killed_run_still_holds_it_and_is_named(tmp_path):
    """A run killed alone (its parent shell, not its process group) leaves the stage it started
    running: the stage may still write into the directory, so the lock holds until it ends."""
    first = holder(tmp_path / "work", "sleep 120 & echo $! ; wait")
    left = int(first.stdout.readline())
    os.kill(first.pid, signal.SIGKILL)
    first.wait()
    try:
        refused = second_run(tmp_path / "work")
        assert refused.returncode == 1
        assert f"(PID {first.pid}, probe.sh, started" in refused.stderr
        assert f"has ended, but processes it started still run: PID {left})" in refused.stderr
    finally:
        os.kill(left, signal.SIGKILL)
    deadline = time.monotonic() + 30
    while second_run(tmp_path / "work").returncode != 0:
        assert time.monotonic() < deadline, "the lock outlived the last process that held it"
        time.sleep(0.2)


# Each pipeline locks the directory it writes (its work dir, save dir or output dir) after checking
# its inputs. Inputs: just enough for the script to get there (WORK is the held directory).
def fake_inputs(tmp: Path) -> Dict[str, tuple]:
    work = tmp / "work"
    for name in (
        "data-bin/dict.en.txt",
        "data-bin/dict.src.txt",
        "data-bin/dict.txt",
        "bin/dict.source.txt",
        "bin/spm.model",
    ):
        (work / name).parent.mkdir(parents=True, exist_ok=True)
        (work / name).write_text("a 1\n")
    for name in (
        "checkpoint_last.pt",
        "checkpoint_best.pt",
        "model.pt",
        "ref.txt",
        "gold.m2",
        "corpus.en",
        "corpus.es",
    ):
        (tmp / name).write_text("x\n")
    for name in ("lm-bin/dict.txt", "lm-bin/test.bin", "lm-bin/test.idx"):  # an LM's test subset
        (tmp / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp / name).write_text("a 1\n")
    w, t = str(work), str(tmp)
    save = ["--save-dir", w]
    return {
        "translation/prepare_bible.sh": (work, ["--work-dir", w]),
        "translation/prepare_parallel.sh": (
            work,
            [*(x for s in ("train", "valid", "test") for x in (f"--{s}", f"{t}/corpus")), "--src", "en", "--tgt", "es"]
            + ["--work-dir", w, "--subword", "sentencepiece"],
        ),
        "translation/prepare_wmt14.sh": (work, ["--work-dir", w, "--download-dir", f"{t}/downloads"]),
        "translation/train_bible.sh": (work, ["--data-bin", f"{w}/data-bin", *save, "--gpus", "0"]),
        "translation/train_wmt14.sh": (work, ["--recipe", "base-rk4", "--work-dir", w, *save, "--gpus", "0"]),
        "translation/evaluate.sh": (
            work,
            ["--data-bin", f"{w}/data-bin", "--checkpoint-dir", t, "--out-dir", w, "--ref", f"{t}/ref.txt"]
            + ["--lang", "es", "--gpus", "0"],
        ),
        "translation/run_bible_demo.sh": (work, ["--work-dir", w, "--gpus", "0"]),
        "translation/quality_study.sh": (work, ["--work-dir", w, "--gpus", "0"]),
        "translation/demo_sweep.sh": (work, ["--work-dir", w]),
        "summarization/prepare.sh": (work, ["--work-dir", w]),
        "summarization/train.sh": (work, ["--work-dir", w, *save, "--gpus", "0"]),
        "summarization/evaluate.sh": (
            work,
            ["--work-dir", w, "--checkpoint", f"{t}/model.pt", "--ref", f"{t}/ref.txt", "--out-dir", w, "--gpus", "0"],
        ),
        "gec/prepare.sh": (
            work,
            ["--work-dir", w, "--train-m2", f"{t}/gold.m2", "--valid-m2", f"{t}/gold.m2", "--test-m2", f"{t}/gold.m2"],
        ),
        "gec/train.sh": (work, ["--work-dir", w, *save, "--gpus", "0"]),
        "gec/evaluate.sh": (
            work,
            ["--work-dir", w, "--checkpoint", f"{t}/model.pt", "--test-m2", f"{t}/gold.m2", "--out-dir", w]
            + ["--gpus", "0"],
        ),
        "distillation/run.sh": (work, ["--work-dir", w, "--gpus", "0"]),
        "distillation/step_counts.sh": (
            work,
            ["--checkpoint", f"{t}/model.pt", "--data-bin", w, "--ref", f"{t}/ref.txt", "--lang", "es"]
            + ["--out-dir", w, "--gpus", "0"],
        ),
        "step_adaptation/run.sh": (work, ["--work-dir", w, "--gpus", "0"]),
        "language_modeling/prepare.sh": (work, ["--work-dir", w]),
        "language_modeling/train.sh": (work, ["--work-dir", w, *save, "--gpus", "0"]),
        "language_modeling/evaluate.sh": (
            work,
            ["--work-dir", w, "--data-bin", f"{t}/lm-bin", "--checkpoint-dir", t, "--out-dir", w, "--gpus", "0"],
        ),
        "language_modeling/sample.sh": (
            work,
            ["--work-dir", w, "--checkpoint-dir", t, "--prompt", "In the beginning", "--out-dir", w, "--gpus", "0"],
        ),
        "language_modeling/demo.sh": (work, ["--work-dir", w, "--gpus", "0"]),
        "language_modeling/study.sh": (work, ["--work-dir", w, "--gpus", "0"]),
        "transformers/demo.sh": (work, ["--work-dir", w]),
    }


PIPELINES = sorted(
    str(path.relative_to(EXAMPLES))
    for path in EXAMPLES.glob("*/*.sh")
    if path.name not in ("score.sh", "recipe.sh")  # they write no directory
)


def test_every_pipeline_that_writes_a_directory_is_tried(tmp_path):
    assert sorted(fake_inputs(tmp_path)) == PIPELINES


@pytest.mark.parametrize("script", PIPELINES)
def test_every_pipeline_refuses_a_directory_another_run_holds(script, tmp_path):
    directory, args = fake_inputs(tmp_path)[script]
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    first = holder(directory)
    try:
        result = subprocess.run(
            ["bash", str(EXAMPLES / script), *args],
            capture_output=True,
            text=True,
            env=dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"),
            timeout=120,
        )
    finally:
        stop(first)
    assert result.returncode == 1, result.stderr
    assert f"is in use by another run (PID {first.pid}, probe.sh, started" in result.stderr
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == sorted(
        [*before, directory.relative_to(tmp_path) / ".pipeline.lock"]
    )


def test_two_wmt14_preparations_share_no_download_at_a_time(tmp_path):
    """The download dir is shared by the language pairs: a second preparation waits for none."""
    first = holder(tmp_path / "downloads")
    try:
        result = subprocess.run(
            ["bash", str(EXAMPLES / "translation" / "prepare_wmt14.sh"), "--pair", "en-fr"]
            + ["--work-dir", str(tmp_path / "en-fr"), "--download-dir", str(tmp_path / "downloads")],
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        stop(first)
    assert result.returncode == 1
    assert f"{tmp_path / 'downloads'} is in use by another run (PID {first.pid}," in result.stderr


def test_a_pipeline_killed_mid_run_refuses_a_second_run_then_resumes(tmp_path):
    work = tmp_path / "bible"
    command = ["bash", str(EXAMPLES / "translation" / "prepare_bible.sh"), "--work-dir", str(work)]
    command += ["--train-pairs", "200", "--valid-pairs", "16", "--test-pairs", "16", "--vocab-size", "250"]
    command += ["--workers", "1"]
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONWARNINGS="ignore")
    first = subprocess.Popen(command, stderr=subprocess.PIPE, text=True, env=env, start_new_session=True)
    try:
        assert "run corpus extraction" in first.stderr.readline() + first.stderr.readline()
        second = subprocess.run(command, capture_output=True, text=True, env=env, timeout=120)
        assert second.returncode == 1
        named = re.search(
            rf"{re.escape(str(work))} is in use by another run \(PID (\d+), prepare_bible.sh, started", second.stderr
        )
        assert named, second.stderr
        # the script runs as its supervisor's child (scripts/supervise.sh), which holds the lock
        pid = int(named.group(1))
        assert first.pid in (pid, int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1]))
    finally:
        stop(first)
        first.stderr.close()
    assert not (work / "data-bin").exists()
    rerun = subprocess.run(command, capture_output=True, text=True, env=env, timeout=600)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert (work / "data-bin" / "dict.en.txt").is_file()
