"""Distillation through fairseq's CLIs: teacher → student (a few updates) → decode without teacher."""

import hashlib
import json
import os
import re
import subprocess

import pytest

from ode_seq.checkpoint_files import load_checkpoint
from testkit.in_process import run_in_process
from tests.e2e.cli import PRE_NORM_TRANSFORMER, ROOT, TINY_MODEL, TRAIN, logged_updates, subset_args
from tests.e2e.corpus import CLI_SIZES, reversal_data_bin

UPDATES = 12


@pytest.fixture(scope="module")
def distilled(tmp_path_factory):
    """(data-bin, teacher checkpoint, student save dir, distillation log, teacher digest before)."""
    root = tmp_path_factory.mktemp("distil")
    data_bin = reversal_data_bin(root, CLI_SIZES)
    teacher_dir = root / "teacher"
    run_in_process(
        "fairseq-train",
        [
            str(data_bin),
            *PRE_NORM_TRANSFORMER,
            *TRAIN,
            "--max-update",
            "10",
            "--no-epoch-checkpoints",
            "--disable-validation",
            "--save-dir",
            str(teacher_dir),
        ],
        check=True,
    )
    teacher = teacher_dir / "checkpoint_last.pt"
    digest = hashlib.sha256(teacher.read_bytes()).hexdigest()
    student_dir = root / "student"
    out = run_in_process(
        "fairseq-train",
        [
            str(data_bin),
            "--arch",
            "stable_ode_transformer_small",
            *TINY_MODEL,
            "--encoder-ode-steps",
            "4",
            "--decoder-ode-steps",
            "4",
            *TRAIN,
            "--criterion",
            "ode_trajectory_distillation",
            "--teacher-path",
            str(teacher),
            "--init-from-teacher",
            str(teacher),
            "--ce-start-update",
            "100",
            *logged_updates(UPDATES, student_dir),
        ],
        check=True,
    )
    return data_bin, teacher, student_dir, out.stdout + out.stderr, digest


def test_distillation_lowers_the_trajectory_loss_through_fairseq_train(distilled):
    log = distilled[3]
    losses = [float(x) for x in re.findall(r"train_inner .*?trajectory=([\d.]+)", log)]
    assert len(losses) == UPDATES
    assert max(losses[-3:]) < 0.8 * losses[0]


def test_teacher_checkpoint_is_untouched_and_not_saved_with_the_student(distilled):
    _, teacher, student_dir, _, digest = distilled
    assert hashlib.sha256(teacher.read_bytes()).hexdigest() == digest
    state = load_checkpoint(str(student_dir / "checkpoint_last.pt"))
    assert state["criterion"] is None
    assert not any(key.startswith("teacher") for key in state["model"])
    assert state["cfg"]["model"].initialised_from_teacher is True


def test_student_decodes_with_fairseq_generate_without_the_teacher(distilled):
    data_bin, teacher, student_dir, _, _ = distilled
    teacher.rename(teacher.with_suffix(".moved"))
    try:
        student = student_dir / "checkpoint_last.pt"
        args = subset_args(data_bin, student, "valid", "--beam", "2", "--max-tokens", "1000")
        out = run_in_process("fairseq-generate", args, check=True)
    finally:
        teacher.with_suffix(".moved").rename(teacher)
    assert len(re.findall(r"^H-\d+\t", out.stdout, re.M)) == 30


def test_analysis_reports_the_students_error_per_teacher_layer_and_euler_bounds(distilled, tmp_path):
    data_bin, teacher, student_dir, _, _ = distilled
    run_in_process(
        "python",
        [
            "-m",
            "ode_seq.cli.analyze",
            "--path",
            str(student_dir / "checkpoint_last.pt"),
            "--data",
            str(data_bin),
            "--out",
            str(tmp_path),
            "--teacher",
            str(teacher),
            "--control-times",
            "uniform",
            "--max-sentences",
            "8",
            "--model-overrides",
            "{'encoder_ode_steps': 8, 'decoder_ode_steps': 8}",
        ],
        check=True,
    )
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["model_overrides"] == {"encoder_ode_steps": 8, "decoder_ode_steps": 8}
    assert report["figures"]["teacher_errors"] == "teacher_errors.png"
    for stack in ("encoder", "decoder"):
        layers = report["teacher_errors"][stack]
        assert [e["layer"] for e in layers] == [1, 2]  # the teacher's 2 layers
        assert [e["control_time"] for e in layers] == [1.0, 2.0] == [e["step_time"] for e in layers]
        assert all(0 < e["relative"] < 10 and 0 < e["error"] for e in layers)
        (bound,) = report["euler_error_bounds"][stack]
        assert (bound["steps"], bound["step_size"], bound["reference_steps"]) == (8, 0.25, 128)
        assert bound["sentences"] == 8 and bound["measured_error"]["max"] > 0
        assert bound["lipschitz_weights"] > 0 and bound["bound_weights"]["max"] > 0


@pytest.mark.parametrize(
    "options, message",
    [
        (["--steps", "2", "--layers", "3"], "--steps 2 < --layers 3"),
        (["--attention-kernel", "cosine"], "--attention-kernel must be dot or l2"),
        (["--control-times", "geometric"], "--control-times must be uniform or distance"),
        (["--heads"], "option --heads needs a value"),
        (["--teacher-iterations", "5"], "IIET is defined here for 1 to 4 iterations"),
        (
            ["--teacher-iterations", "2", "--student-iterations", "2", "--control-times", "uniform"],
            "--student-iterations 2 is not fewer than --teacher-iterations 2",
        ),
        (["--teacher-iterations", "2"], "block by block: pass --control-times uniform"),
    ],
)
def test_example_script_refuses_bad_options_before_doing_anything(tmp_path, options, message):
    script = os.path.join(ROOT, "examples", "distillation", "run.sh")
    result = subprocess.run(
        ["bash", script, "--work-dir", str(tmp_path / "work"), *options],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 2 and message in result.stderr
    assert not (tmp_path / "work").exists()
