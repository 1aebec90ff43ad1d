"""A stopped command leaves no process behind (issue 28, item 2).

Each long command is started with a mark in its environment and stopped the way users stop things:
SIGTERM to its PID (`kill PID`), SIGINT (Ctrl-C), SIGHUP (a closed terminal), or `timeout` (sending
SIGTERM to the `timeout` process makes it do what it does when its time is up: SIGTERM to its
command, then to its whole process group). Afterwards /proc must hold no process with the mark, and
no file of the run may change any more. The supervisor (scripts/supervise.sh) is what makes a plain
`kill PID` of a bash script reach the foreground child it waits for, such as fairseq-train.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.e2e.cli import ROOT
from tests.reliability.process_tree import (
    ARCH,
    PREPARE_ARGS,
    TINY_MODEL,
    TRANSLATION,
    Run,
    demo_args,
    file_states,
    pipeline_env,
)

SUPERVISE = Path(ROOT) / "scripts" / "supervise.sh"
QUIET_SECONDS = 1.0  # how long the files of a stopped run are watched for changes


def assert_stopped_cleanly(run: Run, sig: signal.Signals, files: Path) -> None:
    """The run ended by ``sig`` (or its `timeout` with 128 + its number), no process of it is left,
    and no file under ``files`` changes afterwards."""
    returncode = run.finish(timeout=120)
    assert returncode in (-sig, 128 + sig), (returncode, run.log()[-3000:])
    assert run.commands() == []
    before = file_states(files)
    time.sleep(QUIET_SECONDS)
    assert file_states(files) == before


def stop_script(tmp_path: Path, body: str, name: str = "outer.sh") -> Path:
    """An executable bash script that sources the supervisor, then runs ``body``."""
    script = tmp_path / name
    script.write_text(f"#!/usr/bin/env bash\nset -euo pipefail\nsource {SUPERVISE}\n{body}\n")
    script.chmod(0o755)
    return script


@pytest.fixture
def nested_scripts(tmp_path) -> Path:
    """outer.sh: a background child, a process in a session of its own, one whose parent has ended,
    and a nested script whose foreground pipeline is the deepest process; ready.txt appears when all run."""
    inner = stop_script(tmp_path, f"touch {tmp_path}/ready.txt\nsleep 300 | cat", "inner.sh")
    return stop_script(tmp_path, f"sleep 301 &\nsetsid sleep 302 &\nbash -c 'sleep 303 &'\nbash {inner}")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP], ids=lambda s: s.name)
def test_a_supervised_script_ends_every_process_it_started(nested_scripts, tmp_path, sig):
    run = Run([str(nested_scripts)], tmp_path / "logs", env=dict(os.environ))
    run.wait_until(lambda: (tmp_path / "ready.txt").exists() and run.running("sleep 302"), "all processes ran")
    commands = run.commands()
    assert sum("sleep 30" in line for line in commands) == 4
    # The supervisor and the script it runs; the nested script is not supervised again.
    assert sum(line.endswith("outer.sh") for line in commands) == 2
    assert sum(line.endswith("inner.sh") for line in commands) == 1
    run.process.send_signal(sig)
    assert_stopped_cleanly(run, sig, tmp_path)
    assert f"outer.sh: stopped by {sig.name}; no process it started is left" in run.log()


def test_a_process_that_ignores_sigterm_is_killed_after_the_grace_period(tmp_path):
    script = stop_script(tmp_path, f"bash -c \"trap '' TERM; touch {tmp_path}/ready.txt; sleep 309\"")
    run = Run([str(script)], tmp_path / "logs", env=dict(os.environ))
    run.wait_until(lambda: run.running("sleep 309"), "the process ignoring SIGTERM ran")
    run.process.send_signal(signal.SIGTERM)
    assert_stopped_cleanly(run, signal.SIGTERM, tmp_path)


def test_a_supervised_script_keeps_its_standard_input_and_exit_status(tmp_path):
    script = stop_script(tmp_path, "cat\nexit 3")
    result = subprocess.run([str(script)], input="passed on\n", capture_output=True, text=True)
    assert (result.returncode, result.stdout) == (3, "passed on\n")


@pytest.mark.parametrize("stopper", ["kill", "timeout"])
def test_gpu_smoke_run_stopped_in_its_study_leaves_no_process(data_bin, tmp_path, stopper):
    out = tmp_path / "gpu-run"
    command = [
        "bash",
        str(Path(ROOT) / "benchmarks" / "gpu.sh"),
        "--cpu-smoke",
        "--parts",
        "study",
        "--out-dir",
        str(out),
        "--data-bin",
        str(data_bin),
        "--seconds",
        "600",
    ]
    env = {k: v for k, v in pipeline_env(PYTHON=sys.executable).items() if k != "OUT"}
    run = Run(["timeout", "900", *command] if stopper == "timeout" else command, tmp_path / "logs", env=env)
    run.wait_until(lambda: run.running("benchmarks.gpu_study"), "the study started")
    run.process.send_signal(signal.SIGTERM)
    assert_stopped_cleanly(run, signal.SIGTERM, out)
    (part,) = json.loads((out / "parts.json").read_text())["parts"]
    assert part["name"] == "study" and part["status"].startswith("stopped by SIGTERM"), part
    assert "## Quality study" in (out / "summary.md").read_text()


def test_demo_stopped_by_ctrl_c_during_training_leaves_no_process(bible_work, tmp_path):
    run = Run(
        ["bash", str(Path(ROOT) / "scripts" / "demo.sh"), "--work-dir", str(bible_work), *demo_args(300, 100)],
        tmp_path / "logs",
    )
    run.wait_until(lambda: "/300 (" in run.log(), "training logged its first updates")
    assert run.running("fairseq-train")
    run.process.send_signal(signal.SIGINT)
    assert_stopped_cleanly(run, signal.SIGINT, bible_work)
    assert not (bible_work / "checkpoints" / ARCH / "train.done").exists()


def test_training_stage_stopped_by_kill_leaves_no_process(bible_work, tmp_path):
    save = tmp_path / "checkpoints"
    run = Run(
        [
            str(TRANSLATION / "train_bible.sh"),
            "--data-bin",
            str(bible_work / "data-bin"),
            "--save-dir",
            str(save),
            "--arch",
            ARCH,
            "--gpus",
            "0",
            "--minutes",
            "0",
            "--max-update",
            "300",
            "--save-interval-updates",
            "100",
            "--",
            *TINY_MODEL,
        ],
        tmp_path / "logs",
    )
    run.wait_until(lambda: "/300 (" in run.log(), "training logged its first updates")
    assert run.running("fairseq-train") and run.running("train_progress.py")
    run.process.send_signal(signal.SIGTERM)
    assert_stopped_cleanly(run, signal.SIGTERM, save)
    assert not (save / "train.done").exists()


def test_quality_study_stopped_while_runs_train_in_parallel_leaves_no_process(bible_work, tmp_path):
    run = Run(
        [
            str(TRANSLATION / "quality_study.sh"),
            "--work-dir",
            str(bible_work),
            "--configs",
            "residual_6_6 rk4_6_6",
            "--seeds",
            "1",
            "--max-update",
            "300",
            "--save-interval-updates",
            "50",
            "--embed-dim",
            "32",
            "--jobs",
            "2",
            "--gpus",
            "0",
            *PREPARE_ARGS,
        ],
        tmp_path / "logs",
    )
    run.wait_until(lambda: sum("bin/fairseq-train" in line for line in run.commands()) == 2, "two trainings ran")
    run.process.send_signal(signal.SIGTERM)
    assert_stopped_cleanly(run, signal.SIGTERM, bible_work)


def test_a_gpu_run_part_ends_when_the_run_is_killed(data_bin, tmp_path):
    """SIGKILL leaves gpu_run.py no time to stop its part, which runs in a session of its own; the
    part still ends, by the parent-death signal it asked for."""
    command = [sys.executable, "-m", "benchmarks.gpu_run", "--smoke", "--parts", "study", "--seconds", "600"]
    command += ["--out-dir", str(tmp_path / "gpu-run"), "--data-bin", str(data_bin), "--lm-data-bin", str(data_bin)]
    env = {k: v for k, v in pipeline_env().items() if k != "OUT"}
    run = Run(command, tmp_path / "logs", env=env)
    run.wait_until(lambda: run.running("benchmarks.gpu_study"), "the study started")
    run.process.kill()
    run.process.wait()
    deadline = time.monotonic() + 10
    while run.commands() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert run.commands() == []
