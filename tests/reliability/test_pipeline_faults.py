"""Faults in the middle of a pipeline (issue 28, item 3, "Faults"): a kill at any stage, and a disk
that fills up while a stage writes.

A kill is SIGKILL to the pipeline's whole process group, so that no process can clean up: every stage
must leave either its complete output or none that is used. Rerunning the same command must then end
with exactly the result of an uninterrupted run. A full disk is simulated with RLIMIT_FSIZE (`ulimit
-f`, portable) and, where user namespaces allow it, with a small tmpfs (a real ENOSPC); the stage
must fail with a message that says what happened, leave the outputs of the finished stages as they
were, and the same command must finish once there is room.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
from pathlib import Path
from typing import Callable, Dict, List

import pytest
import torch

from ode_seq.checkpoint_files import load_checkpoint
from tests.reliability.process_tree import ARCH, PREPARE_ARGS, TRANSLATION, Run, demo_args, pipeline_env

MAX_UPDATE, SAVE_INTERVAL = 24, 4
DEMO = [str(TRANSLATION / "run_bible_demo.sh"), "--keep-checkpoints", *demo_args(MAX_UPDATE, SAVE_INTERVAL)]


def digests(directory: Path) -> Dict[str, str]:
    """The SHA-256 of every file under ``directory`` but fairseq-preprocess's logs and the pipelines'
    lock files (which hold times and process ids), by relative path."""
    return {
        str(path.relative_to(directory)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(directory.rglob("*"))
        if path.is_file() and path.name not in ("preprocess.log", ".pipeline.lock")
    }


def parameters(path: Path) -> Dict[str, torch.Tensor]:
    return load_checkpoint(str(path))["model"]


def assert_same_result(work: Path, reference: Path) -> None:
    """The data, the final and averaged parameters, the translations and the scores of ``work`` are
    those of ``reference``."""
    assert digests(work / "data-bin") == digests(reference / "data-bin")
    save, reference_save = work / "checkpoints" / ARCH, reference / "checkpoints" / ARCH
    for checkpoint in ("checkpoint_last.pt", "eval-test/averaged.pt"):
        ours, theirs = parameters(save / checkpoint), parameters(reference_save / checkpoint)
        assert ours.keys() == theirs.keys()
        assert [k for k in ours if not torch.equal(ours[k], theirs[k])] == [], checkpoint
    for output in ("generate-test.txt", "scores.txt"):
        assert (save / "eval-test" / output).read_text() == (reference_save / "eval-test" / output).read_text()


@pytest.fixture(scope="module")
def reference(prepared_bible, tmp_path_factory) -> Path:
    """The uninterrupted demo run on a copy of the prepared slice, checkpoints kept."""
    work = tmp_path_factory.mktemp("uninterrupted") / "work"
    shutil.copytree(prepared_bible, work, symlinks=True)
    result = subprocess.run(
        [*DEMO[:1], "--work-dir", str(work), *DEMO[1:]], capture_output=True, text=True, env=pipeline_env()
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return work


def new_text(path: Path, offset: int) -> str:
    """What was appended to ``path`` after its first ``offset`` characters."""
    return path.read_text(errors="replace")[offset:] if path.exists() else ""


def test_a_pipeline_killed_in_each_stage_resumes_to_the_uninterrupted_result(prepared_bible, reference, tmp_path):
    work = tmp_path / "work"
    command = [*DEMO[:1], "--work-dir", str(work), *DEMO[1:]]
    save = work / "checkpoints" / ARCH
    prepare_log = work / "prepare.log"

    def prepare_stage(stage: str, process: str) -> Callable[[Run, int], bool]:
        return lambda run, offset: f"run {stage}" in new_text(prepare_log, offset) and run.running(process)

    def demo_stage(stage: str, process: str) -> Callable[[Run, int], bool]:
        return lambda run, offset: f"run {stage}" in run.log() and run.running(process)

    evaluation = save / "eval-test"
    kills: List[tuple] = [  # (where, when it is reached, the output that must not exist after the kill)
        ("tokenisation", lambda run, offset: (work / "tok.tmp" / "train.en").exists(), work / "tok"),
        ("spm", prepare_stage("SentencePiece training", "sentencepiece_tool.py"), work / "spm.model"),
        ("binarisation", prepare_stage("binarisation", "fairseq-preprocess"), work / "data-bin"),
        ("training", lambda run, offset: any(save.glob("checkpoint_*_8.pt")), save / "train.done"),
        ("averaging", demo_stage("checkpoint averaging", "ode_seq.cli.average"), evaluation / "averaged.pt"),
        ("generation", demo_stage("generation", "fairseq-generate"), evaluation / "generate-test.txt"),
        ("scoring", demo_stage("scoring", "ode_seq.metrics.bleu"), evaluation / "scores.txt"),
    ]
    for where, reached, unfinished in kills:
        offset = len(prepare_log.read_text(errors="replace")) if prepare_log.exists() else 0
        run = Run(command, tmp_path / "logs" / where, env=pipeline_env(), new_session=True)
        run.wait_until(lambda: reached(run, offset), f"{where} ran")
        run.kill_group()
        assert not unfinished.exists(), f"killed during {where}, yet {unfinished} is there"
    resumed = Run(command, tmp_path / "logs" / "resumed", env=pipeline_env())
    assert resumed.finish() == 0, resumed.log()[-3000:]
    assert f"Loaded checkpoint {save}/checkpoint_last.pt" in (save / "train.log").read_text()
    assert_same_result(work, reference)


def test_a_demo_killed_while_it_deletes_the_checkpoints_resumes(reference, tmp_path):
    """The demo deletes the training checkpoints once the averaged model is scored. A `find` that
    deletes one checkpoint and then kills the demo's process group stands for a kill in the middle."""
    work = tmp_path / "work"
    shutil.copytree(reference, work, symlinks=True)
    save = work / "checkpoints" / ARCH
    shims = tmp_path / "shims"
    shims.mkdir()
    (shims / "find").write_text(
        "#!/usr/bin/env bash\n"
        'if [[ " $* " != *" -delete "* ]]; then exec /usr/bin/find "$@"; fi\n'
        'for checkpoint in "$1"/checkpoint_*_*.pt; do rm "$checkpoint"; break; done\n'
        "kill -KILL 0\n"
    )
    (shims / "find").chmod(0o755)
    command = [*DEMO[:1], "--work-dir", str(work), *DEMO[2:]]  # as the demo runs by default
    env = pipeline_env()
    killed = Run(command, tmp_path / "logs" / "killed", env={**env, "PATH": f"{shims}:{env['PATH']}"}, new_session=True)
    killed.finish()
    assert len(list(save.glob("checkpoint*.pt"))) >= 5, "the kill was to leave checkpoints"
    result = subprocess.run(command, capture_output=True, text=True, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    assert not list(save.glob("checkpoint*.pt"))
    scores = (reference / "checkpoints" / ARCH / "eval-test" / "scores.txt").read_text()
    assert (save / "eval-test" / "scores.txt").read_text() == scores


def evaluate_command(work: Path, *options: str) -> List[str]:
    """evaluate.sh as the demo runs it on ``work``'s run (the newest 5 checkpoints averaged)."""
    return [
        str(TRANSLATION / "evaluate.sh"),
        "--data-bin",
        str(work / "data-bin"),
        "--checkpoint-dir",
        str(work / "checkpoints" / ARCH),
        "--gpus",
        "0",
        "--ref",
        str(work / "raw" / "test.es"),
        "--lang",
        "es",
        "--average-last",
        "5",
        "--checkpoint-kind",
        "update",
        *options,
        "--",
        "--num-workers",  # RLIMIT_FSIZE also limits the shared memory of data-loading workers
        "0",
        "--max-len-a",
        "0",
        "--max-len-b",
        "6",
    ]


def limited(kib: int, command: List[str]) -> subprocess.CompletedProcess:
    """``command`` with files limited to ``kib`` KiB (RLIMIT_FSIZE), as on a disk with that much room."""
    return subprocess.run(
        ["bash", "-c", f'ulimit -f {kib} && exec "$@"', "limited", *command],
        capture_output=True,
        text=True,
        env=pipeline_env(),
    )


@pytest.mark.parametrize(
    "stage, kib, removed",
    [
        ("checkpoint averaging", 256, ["averaged.pt", "averaging-config.txt"]),
        ("generation", 4, ["generate-test.txt", "generate.log"]),
    ],
)
def test_a_disk_full_in_evaluation_keeps_the_earlier_outputs_and_says_so(reference, tmp_path, stage, kib, removed):
    work = tmp_path / "work"
    shutil.copytree(reference, work, symlinks=True)
    evaluation = work / "checkpoints" / ARCH / "eval-test"
    for name in [*removed, "run-config.txt", "scores.txt", "scores.json"]:
        (evaluation / name).unlink()
    before = digests(work)
    full = limited(kib, evaluate_command(work))
    assert full.returncode == 1, full.stderr[-3000:]
    assert f"evaluate.sh: error: {stage} did not finish" in full.stderr
    assert f"Files may not grow beyond {kib} KiB here (ulimit -f)" in full.stderr
    assert "The outputs of the finished stages are intact" in full.stderr
    after = digests(work)
    assert {name: after[name] for name in before} == before  # nothing removed or written over
    assert {path.name for path in map(Path, set(after) - set(before))} <= {
        "run-config.txt",
        "averaging-config.txt",
        "generate.log",
    }
    again = subprocess.run(evaluate_command(work), capture_output=True, text=True, env=pipeline_env())
    assert again.returncode == 0, again.stderr[-3000:]
    scores = reference / "checkpoints" / ARCH / "eval-test" / "scores.txt"
    assert (evaluation / "scores.txt").read_text() == scores.read_text()


def test_a_disk_full_in_binarisation_keeps_the_prepared_text_and_says_so(prepared_bible, tmp_path):
    work = tmp_path / "work"
    shutil.copytree(prepared_bible, work, symlinks=True)
    shutil.rmtree(work / "data-bin")
    before = digests(work)
    prepare = [str(TRANSLATION / "prepare_bible.sh"), "--work-dir", str(work), *PREPARE_ARGS]
    full = limited(4, prepare)
    assert full.returncode == 1, full.stderr[-3000:]
    assert "prepare_parallel.sh: error: binarisation did not finish" in full.stderr
    assert "Files may not grow beyond 4 KiB here (ulimit -f)" in full.stderr
    assert not (work / "data-bin").exists() and not (work / "data-bin.tmp").exists()
    assert digests(work) == before
    again = subprocess.run(prepare, capture_output=True, text=True, env=pipeline_env())
    assert again.returncode == 0, again.stderr[-3000:]
    assert digests(work / "data-bin") == digests(prepared_bible / "data-bin")


def user_namespaces_mount_tmpfs() -> bool:
    probe = subprocess.run(["unshare", "-rm", "mount", "-t", "tmpfs", "tmpfs", "/mnt"], capture_output=True)
    return probe.returncode == 0


@pytest.mark.skipif(
    shutil.which("unshare") is None or not user_namespaces_mount_tmpfs(),
    reason="needs unshare and user namespaces that may mount a tmpfs (for a real ENOSPC)",
)
def test_a_real_disk_full_while_averaging_is_named_with_the_room_left(reference, tmp_path):
    """The evaluation's output directory is a 64 KiB tmpfs, mounted in a private mount namespace for
    the command only: the averaged checkpoint (about 800 KB) cannot be written (ENOSPC)."""
    work = tmp_path / "work"
    shutil.copytree(reference, work, symlinks=True)
    small = tmp_path / "small"
    small.mkdir()
    checkpoints = digests(work / "checkpoints")
    command = evaluate_command(work, "--out-dir", str(small / "eval"))
    full = subprocess.run(
        ["unshare", "-rm", "bash", "-c", 'mount -t tmpfs -o size=64k tmpfs "$0" && exec "$@"', str(small), *command],
        capture_output=True,
        text=True,
        env=pipeline_env(),
    )
    assert full.returncode == 1, full.stderr[-3000:]
    assert f"error: checkpoint averaging did not finish (exit 1), so {small}/eval/averaged.pt" in full.stderr
    assert f"The file system of {small}/eval has 0 MiB free" in full.stderr
    assert digests(work / "checkpoints") == checkpoints
