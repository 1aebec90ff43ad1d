"""benchmarks/gpu.sh in its --cpu-smoke mode (every part on the CPU with tiny sizes, so the GPU run
cannot rot between GPU sessions); its time budget is tested in benchmarks/tests/test_gpu_run.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from testkit import device_checks

REPO_ROOT = Path(__file__).resolve().parents[1]
CONFIGS = {"residual_6_6", "rk2_learned_6_6", "rk4_6_6", "residual_24_6"}
LM_CONFIGS = {"residual", "rk2_learned", "rk4", "pcformer", "residual_2x", "iiet"}


@pytest.fixture(scope="module")
def smoke_run(data_bin, lm_data, tmp_path_factory):
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
            str(lm_data),
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
        (family, precision) for family in device_checks.SMOKE_FAMILIES for precision in ("fp16", "bf16")
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
        arch, options = device_checks.training_families(smoke=True)["residual (euler)"]
        args = device_checks.training_arguments(
            str(data_bin), arch, {**device_checks.SMOKE_SIZES.options(), **options}, "bf16", "cpu"
        )
        outcome = device_checks.train_a_few_updates(args)
    finally:
        holder.kill()
        holder.wait()
    assert outcome["updates"] == device_checks.TRAINING_UPDATES
    assert sorted(os.listdir(tmp_path)) == ["checkpoints"]
    assert os.listdir(tmp_path / "checkpoints") == [".fairseq-train.lock"]
