"""The benchmark command in its tiny --smoke mode (its measurement: benchmarks/tests/test_measure.py)."""

import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tests.e2e.cli import run

REPO_ROOT = Path(__file__).resolve().parents[1]

EXPECTED_ROWS = {
    ("training", "euler 2-2 / transformer 2-2"): 2,
    ("training", "rk2 2-2 / transformer 2-2"): 2,
    ("training", "rk2-learned 2-2 / transformer 2-2"): 2,
    ("training", "rk4 2-2 / transformer 2-2"): 2,
    ("checkpointing", "rk4 2-2 ckpt-stages / transformer 2-2"): 2,
    ("rk-overhead", "euler encoder 1 blocks / transformer encoder 1 layers"): 2,
    ("rk-overhead", "heun encoder 1 blocks / transformer encoder 2 layers"): 2,
    ("rk-overhead", "rk4 encoder 1 blocks / transformer encoder 4 layers"): 2,
    ("generation", "euler 2-2 / transformer 2-2"): 1,
    ("generation", "rk4 2-2 / transformer 2-2"): 2,
    ("generation", "rk4-encdec 2-2 / transformer 2-2"): 1,
    ("decoder-step", "euler block (n=1) / transformer layer"): 3,
    ("decoder-step", "heun block (n=2) / transformer layer"): 3,
    ("decoder-step", "rk4 block (n=4) / transformer layer"): 3,
}


def test_smoke_run_prints_every_row_with_a_finite_ratio(tmp_path):
    out = tmp_path / "rows.json"
    result = run("python", ["-m", "benchmarks.run", "--smoke", "--json", str(out)])
    rows = json.loads(out.read_text())["rows"]
    counts = {}
    for row in rows:
        key = (row["section"], row["comparison"])
        counts[key] = counts.get(key, 0) + 1
        assert math.isfinite(row["ratio"]) and row["ratio"] > 0, row
        assert f"| {row['section']} | {row['comparison']} | {row['metric']} |" in result.stdout
    assert counts == EXPECTED_ROWS
    target = {(r["comparison"], r["metric"]): r["target"] for r in rows}
    assert target[("rk4 encoder 1 blocks / transformer encoder 4 layers", "source tokens/s (fwd+bwd)")] == [">=", 0.95]
    assert target[("rk4 2-2 / transformer 2-2", "sentences/s (beam 4)")] == [">=", 0.85]
    assert target[("rk4 2-2 ckpt-stages / transformer 2-2", "peak training memory")] == ["<=", 1.2]
    assert target[("rk4 block (n=4) / transformer layer", "seconds per step @prefix 8")] == ["<=", 4.4]


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU: the script would run")
def test_gpu_script_refuses_a_machine_without_cuda_and_writes_nothing(tmp_path):
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    result = subprocess.run(
        ["bash", str(REPO_ROOT / "benchmarks" / "gpu.sh"), "--out-dir", str(tmp_path / "out")],
        capture_output=True,
        text=True,
        env=env,
    )
    assert result.returncode != 0
    assert "sees no CUDA device" in result.stderr and "--cpu-smoke" in result.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.skipif(
    shutil.which("cc") is None and shutil.which("gcc") is None, reason="torch.compile on CPU needs a C compiler"
)
def test_compile_section_compares_compiled_and_eager_rk4_blocks(tmp_path):
    out = tmp_path / "rows.json"
    run("python", ["-m", "benchmarks.run", "--smoke", "--sections", "compile", "--json", str(out)])
    rows = json.loads(out.read_text())["rows"]
    assert [(r["section"], r["comparison"], r["metric"]) for r in rows] == [
        ("compile", "rk4 encoder 1 blocks, torch.compile / eager", "source tokens/s (fwd+bwd)"),
        ("compile", "rk4 encoder 1 blocks, torch.compile / eager", "source tokens/s (eval forward)"),
    ]
    assert all(math.isfinite(r["ratio"]) and r["ratio"] > 0 for r in rows)


def test_lm_sections_compare_ode_lms_with_transformer_lm_at_the_same_layer_evaluations(tmp_path):
    out = tmp_path / "rows.json"
    run("python", ["-m", "benchmarks.run", "--smoke", "--sections", "lm-training", "lm-generation", "--json", str(out)])
    rows = json.loads(out.read_text())["rows"]
    assert all(math.isfinite(r["ratio"]) and r["ratio"] > 0 for r in rows)
    speed, memory = "target tokens/s (train step)", "peak training memory"
    training = {(r["section"], r["comparison"], r["metric"]) for r in rows if r["section"] != "lm-generation"}
    same_evaluations = [("euler 2L", 2), ("rk2 2L", 4), ("rk2-learned 2L", 4), ("rk4 2L", 8)]
    same_parameters = [(label, 2) for label, _ in same_evaluations[1:]]
    checkpointing = [("rk4 2L ckpt-stages", "transformer_lm 8L"), ("rk4 2L ckpt-stages", "rk4 2L")]
    expected = {
        ("lm-training", f"{ode} / transformer_lm {layers}L", metric)
        for ode, layers in same_evaluations + same_parameters
        for metric in (speed, memory)
    }
    expected |= {("lm-checkpointing", f"{a} / {b}", metric) for a, b in checkpointing for metric in (speed, memory)}
    assert training == expected and len(rows) == len(expected) + 4
    generation = [r["comparison"] for r in rows if r["section"] == "lm-generation"]
    assert generation == [f"{ode} / transformer_lm {layers}L" for ode, layers in same_evaluations]
