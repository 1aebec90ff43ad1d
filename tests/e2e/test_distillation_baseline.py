"""examples/distillation/run.sh --baseline end to end on a slice of the Bible corpus: a tiny teacher,
distilled and from-scratch students for two seeds, and the table comparing them."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.e2e.cli import run_pipeline
from tests.e2e.corpus import BIBLE_SLICE

REPO_ROOT = Path(__file__).resolve().parents[2]
RUN = REPO_ROOT / "examples" / "distillation" / "run.sh"
TINY = [
    "--max-update",
    "6",
    "--teacher-minutes",
    "0",
    "--student-minutes",
    "0",
    "--embed-dim",
    "32",
    "--ffn-dim",
    "64",
    "--heads",
    "2",
    "--layers",
    "2",
    "--steps",
    "2",
    "--warmup",
    "4",
    "--ce-start-update",
    "2",
    "--ce-warmup-updates",
    "2",
    "--freeze-interface-updates",
    "2",
    *BIBLE_SLICE,
]


def run(*args: str) -> subprocess.CompletedProcess:
    return run_pipeline(RUN, *args)


@pytest.fixture(scope="module")
def baseline_run(tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess]:
    work = tmp_path_factory.mktemp("distillation") / "work"
    result = run("--work-dir", str(work), *TINY, "--seeds", "1 2", "--baseline")
    assert result.returncode == 0, result.stderr[-4000:]
    return work, result


def test_scratch_students_have_the_students_architecture_and_updates_but_no_teacher(baseline_run):
    work, _ = baseline_run
    for seed in (1, 2):
        distilled = (
            work / "checkpoints" / f"student-stable_ode_transformer_small-dot-euler2-distance-seed{seed}" / "train.log"
        ).read_text()
        scratch = (
            work / "checkpoints" / f"scratch-stable_ode_transformer_small-dot-euler2-seed{seed}" / "train.log"
        ).read_text()
        params = [re.search(r"num\. shared model params: ([\d,]+)", log).group(1) for log in (distilled, scratch)]
        assert params[0] == params[1]
        assert f"seed={seed}," in distilled and f"seed={seed}," in scratch
        assert "criterion='ode_trajectory_distillation'" in distilled
        assert "criterion='label_smoothed_cross_entropy'" in scratch
        assert "init_from_teacher=None" in scratch and "teacher_path" not in scratch
        for log in (distilled, scratch):
            assert re.findall(r"num_updates[ =](\d+)", log)[-1] == "6"


def test_report_ends_with_the_per_seed_and_mean_comparison(baseline_run):
    _, result = baseline_run
    rows = [line for line in result.stdout.splitlines() if line.startswith("| ")]
    assert rows[0].startswith("| seed | distilled student | from scratch |")
    assert [row.split(" | ")[0] for row in rows[1:]] == ["| 1", "| 2", "| mean ± sd"]
    assert "16 test sentences; every run translated each of them." in result.stdout
    assert result.stdout.count("== scratch-") == 2 and result.stdout.count("== student-") == 2


def test_rerun_skips_every_stage(baseline_run):
    work, first = baseline_run
    again = run("--work-dir", str(work), *TINY, "--seeds", "1 2", "--baseline")
    assert again.returncode == 0, again.stderr[-4000:]
    assert "run " not in "".join(line for line in again.stderr.splitlines(keepends=True) if line.startswith("["))
    report = first.stdout[first.stdout.index("English→Spanish Bible test set") :]
    assert again.stdout.endswith(report)


def test_bad_seed_is_refused_before_any_work(tmp_path):
    result = run("--work-dir", str(tmp_path / "work"), "--seeds", "1 x")
    assert result.returncode == 2 and "--seeds takes positive whole numbers, got 'x'" in result.stderr
    assert not (tmp_path / "work").exists()


def test_an_iiet_teacher_is_distilled_into_fewer_iterations_and_scored_at_them_undistilled(baseline_run, tmp_path):
    work = tmp_path / "work"  # the baseline's prepared corpus, none of its models
    shutil.copytree(baseline_run[0], work, ignore=shutil.ignore_patterns("checkpoints"))
    iiet = ["--teacher-iterations", "2", "--student-iterations", "1", "--control-times", "uniform"]
    result = run("--work-dir", str(work), *TINY, *iiet)
    assert result.returncode == 0, result.stderr[-4000:]
    teacher = (work / "checkpoints" / "teacher-iie2" / "train.log").read_text()
    student = (work / "checkpoints" / "student-iie1-from-iie2-uniform-seed1" / "train.log").read_text()
    assert "encoder_ode_method='iie2'" in teacher and "decoder_ode_method='iie2'" in teacher
    assert "decoder_ode_method='iie1'" in student and "criterion='ode_trajectory_distillation'" in student
    assert "finetune_from_model=" in student and "jasmin_weight=0.0" in student
    assert "== teacher-iie2 decoded with iie1 (--model-overrides, not distilled)" in result.stdout
    assert result.stdout.count("BLEU") >= 3
