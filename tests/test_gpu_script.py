"""benchmarks/gpu.sh in its --cpu-smoke mode (every part on the CPU with tiny sizes, so the GPU run
cannot rot between GPU sessions), and the time budget that cuts a part cleanly."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from benchmarks import gpu_checks, gpu_run
from tests.e2e.corpus import preprocess, preprocess_lm, write_lm_corpus, write_reversal_corpus

REPO_ROOT = Path(__file__).resolve().parents[1]
CONFIGS = {"residual_6_6", "rk2_learned_6_6", "rk4_6_6", "residual_24_6"}
LM_CONFIGS = {"residual", "rk2_learned", "rk4", "pcformer", "residual_2x", "iiet"}


@pytest.fixture(scope="module")
def data_bin(tmp_path_factory) -> Path:
    raw = tmp_path_factory.mktemp("corpus")
    write_reversal_corpus(raw)
    preprocess(raw, raw / "bin")
    return raw / "bin"


@pytest.fixture(scope="module")
def lm_data_bin(tmp_path_factory) -> Path:
    raw = tmp_path_factory.mktemp("lm-corpus")
    write_lm_corpus(raw)
    preprocess_lm(raw, raw / "bin")
    return raw / "bin"


@pytest.fixture(scope="module")
def smoke_run(data_bin, lm_data_bin, tmp_path_factory):
    out = tmp_path_factory.mktemp("gpu-run")
    env = dict(os.environ, PYTHON=sys.executable, OMP_NUM_THREADS="1")
    env.pop("OUT", None)
    result = subprocess.run(
        [
            "bash",
            str(REPO_ROOT / "benchmarks" / "gpu.sh"),
            "--cpu-smoke",
            "--out-dir",
            str(out),
            "--data-bin",
            str(data_bin),
            "--lm-data-bin",
            str(lm_data_bin),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=1500,
    )
    return out, result


def records(path: Path) -> list:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_every_part_runs_within_its_limit_and_none_fails(smoke_run):
    out, result = smoke_run
    parts = json.loads((out / "parts.json").read_text())
    assert [p["name"] for p in parts["parts"]] == ["checks", "speed", "study", "lm"], result.stderr[-3000:]
    assert [p["status"] for p in parts["parts"]] == ["finished"] * 4, result.stderr[-3000:]
    assert result.returncode == 0
    assert parts["environment"]["extensions"]["fairseq.data.data_utils_fast"] == "loads"
    assert sorted(os.listdir(out)) == [
        "checks.jsonl",
        "lm.jsonl",
        "parts.json",
        "run.log",
        "speed.json",
        "speed.md",
        "study.jsonl",
        "summary.md",
    ]


def test_checks_pass_on_the_cpu(smoke_run):
    checks = records(smoke_run[0] / "checks.jsonl")
    assert checks and all(check["passed"] for check in checks)
    assert {c["group"] for c in checks} == {"decoding", "adaptive", "training"}
    assert {(c["name"], c["dtype"]) for c in checks if c["group"] == "training"} == {
        (family, precision) for family in gpu_checks.SMOKE_FAMILIES for precision in ("fp16", "bf16")
    }
    decoding = {(c["name"], c["dtype"]) for c in checks if c["group"] == "decoding"}
    assert {("rk4/learned", "fp32"), ("rk4/learned", "bf16"), ("euler/fixed", "bf16")} <= decoding


def test_speed_rows_and_study_curves_are_written(smoke_run):
    out = smoke_run[0]
    assert json.loads((out / "speed.json").read_text())["rows"]
    study = records(out / "study.jsonl")
    assert study[0]["event"] == "start" and set(study[0]["configs"]) == CONFIGS
    valid = [r for r in study if r["event"] == "valid"]
    assert {r["config"] for r in valid} == CONFIGS
    for config in CONFIGS:  # every configuration reached the same updates
        assert [r["updates"] for r in valid if r["config"] == config] == [
            r["updates"] for r in valid if r["config"] == "residual_6_6"
        ]
    assert max(r["updates"] for r in valid) == 6  # the smoke run's --max-updates
    assert {r["config"] for r in study if r["event"] == "test"} == CONFIGS
    summary = (out / "summary.md").read_text()
    for heading in ("## Correctness", "## Speed and memory", "## Quality study", "| residual_24_6 |"):
        assert heading in summary


def test_the_lm_study_trains_every_configuration_alike_and_reports_test_perplexity(smoke_run):
    out = smoke_run[0]
    study = records(out / "lm.jsonl")
    assert study[0]["event"] == "start" and set(study[0]["configs"]) == LM_CONFIGS
    parameters = study[0]["parameters"]  # equal but for coefficients (1 % at this size) and twice the layers
    assert all(abs(parameters[c] / parameters["residual"] - 1) < 0.01 for c in LM_CONFIGS - {"residual_2x"})
    assert parameters["residual_2x"] > 1.9 * parameters["residual"]
    valid = [r for r in study if r["event"] == "valid"]
    for config in LM_CONFIGS:
        assert [r["updates"] for r in valid if r["config"] == config] == [2, 4, 6]
    tests = {r["config"]: r["test_nll"] for r in study if r["event"] == "test"}
    assert tests.keys() == LM_CONFIGS and all(0 < nll < 20 for nll in tests.values())
    summary = (out / "summary.md").read_text()
    assert "## Language-model study" in summary
    residual_row = next(line for line in summary.splitlines() if line.startswith("| residual | 6 |"))
    assert f"{2 ** tests['residual']:.2f}" in residual_row and "+0.0000" in residual_row


def test_training_checks_neither_lock_nor_write_a_save_directory(data_bin, tmp_path, monkeypatch):
    """The checks and the study save no checkpoints: a ``checkpoints`` folder in the working
    directory that another training holds (as in a checkout where one ran) must not stop them."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "checkpoints").mkdir()
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import fcntl, os, sys, time\n"
            "fd = os.open('checkpoints/.fairseq-train.lock', os.O_RDWR | os.O_CREAT)\n"
            "fcntl.flock(fd, fcntl.LOCK_EX); print('held', flush=True); time.sleep(120)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline() == "held\n"
        arch, options = gpu_checks.training_families(smoke=True)["residual (euler)"]
        args = gpu_checks.training_arguments(
            str(data_bin), arch, {**gpu_checks.SMOKE_SIZES.options(), **options}, "bf16", "cpu"
        )
        outcome = gpu_checks.train_a_few_updates(args)
    finally:
        holder.kill()
        holder.wait()
    assert outcome["updates"] == gpu_checks.TRAINING_UPDATES
    assert sorted(os.listdir(tmp_path)) == ["checkpoints"]
    assert os.listdir(tmp_path / "checkpoints") == [".fairseq-train.lock"]


def test_a_part_past_its_limit_is_stopped_and_keeps_its_output(tmp_path):
    sleeper = gpu_run.Part(
        "sleeper",
        1.0,
        lambda options, limit: [
            sys.executable,
            "-c",
            "print('partial result', flush=True); import time; time.sleep(120)",
        ],
    )
    options = gpu_run.Options(str(tmp_path), "", "", "cpu", True)
    started = time.perf_counter()
    with open(tmp_path / "run.log", "w") as log:
        outcome = gpu_run.run_part(sleeper, options, 3.0, log, gpu_run.StopRequest())
    assert time.perf_counter() - started < 3.0 + gpu_run.STOP_GRACE_SECONDS
    assert outcome.status.startswith("cut at its limit of 3 s")
    assert "partial result" in (tmp_path / "run.log").read_text()


def test_a_stop_that_lands_while_a_part_starts_stops_it_and_is_reported(tmp_path):
    """The signal handler only records the stop, so one that arrives before the part's process is
    known (here: before it starts) still ends that process and names the signal in its outcome."""
    sleep = [sys.executable, "-c", "import time; time.sleep(120)"]
    sleeper = gpu_run.Part("sleeper", 1.0, lambda options, limit: sleep)
    stop = gpu_run.StopRequest()
    stop(signal.SIGTERM, None)
    stop(signal.SIGINT, None)  # a later stop changes nothing
    started = time.perf_counter()
    with open(tmp_path / "run.log", "w") as log:
        outcome = gpu_run.run_part(sleeper, gpu_run.Options(str(tmp_path), "", "", "cpu", True), 60.0, log, stop)
    assert time.perf_counter() - started < gpu_run.STOP_GRACE_SECONDS
    assert outcome.status == "stopped by SIGTERM (partial results kept)"


def test_a_stop_ends_the_environment_probe_and_is_reported(tmp_path):
    stop = gpu_run.StopRequest()
    stop(signal.SIGHUP, None)
    started = time.perf_counter()
    found = gpu_run.environment(gpu_run.Options(str(tmp_path), "", "", "cpu", True), stop)
    assert time.perf_counter() - started < gpu_run.STOP_GRACE_SECONDS
    assert found["probe_error"] == "stopped by SIGHUP" and "torch" not in found


def test_a_part_ended_by_a_stop_signal_of_its_own_is_reported_stopped(tmp_path):
    """The supervisor of gpu.sh stops every process of the run; the part may end before this one sees its signal."""
    command = [sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGTERM)"]
    killed = gpu_run.Part("killed", 1.0, lambda options, limit: command)
    with open(tmp_path / "run.log", "w") as log:
        options = gpu_run.Options(str(tmp_path), "", "", "cpu", True)
        outcome = gpu_run.run_part(killed, options, 30.0, log, gpu_run.StopRequest())
    assert outcome.status == "stopped by SIGTERM (partial results kept)"


def test_a_failing_part_is_reported_as_failed(tmp_path):
    failing = gpu_run.Part("failing", 1.0, lambda options, limit: [sys.executable, "-c", "raise SystemExit(3)"])
    with open(tmp_path / "run.log", "w") as log:
        outcome = gpu_run.run_part(
            failing, gpu_run.Options(str(tmp_path), "", "", "cpu", True), 30.0, log, gpu_run.StopRequest()
        )
    assert outcome.status == "failed (exit 3)"
