"""The step-count example scripts: option checks before any work, and their result tables."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.e2e.cli import ROOT

ADAPTATION = os.path.join(ROOT, "examples", "step_adaptation")
DISTILLATION = os.path.join(ROOT, "examples", "distillation")


def _bash(script: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", script, *args], capture_output=True, text=True)


@pytest.mark.parametrize(
    "options, message",
    [
        (["--step-counts", "3 x"], "--step-counts takes positive whole numbers, got 'x'"),
        (["--time-network", "shared"], "--time-network must be per-block or per-weight"),
        (["--lora-rank"], "option --lora-rank needs a value"),
    ],
)
def test_adaptation_script_refuses_bad_options_before_doing_anything(tmp_path, options, message):
    result = _bash(os.path.join(ADAPTATION, "run.sh"), "--work-dir", str(tmp_path / "work"), *options)
    assert result.returncode == 2 and message in result.stderr
    assert not (tmp_path / "work").exists()


@pytest.mark.parametrize(
    "options, message",
    [
        ([], "--checkpoint, --data-bin, --ref and --lang are required"),
        (
            ["--checkpoint", "x.pt", "--data-bin", "d", "--ref", "r", "--lang", "es", "--steps", "0"],
            "--steps takes positive whole numbers, got '0'",
        ),
    ],
)
def test_step_count_script_refuses_bad_options(options, message):
    result = _bash(os.path.join(DISTILLATION, "step_counts.sh"), *options)
    assert result.returncode == 2 and message in result.stderr


def _evaluation(directory, bleu: float, seconds: float, hypotheses: int) -> None:
    """What evaluate.sh leaves in an evaluation directory."""
    os.makedirs(directory)
    signature = "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0"
    with open(os.path.join(directory, "scores.json"), "w") as f:
        json.dump({"sacrebleu": {"13a": {"score": bleu, "signature": signature}}}, f)
    with open(os.path.join(directory, "generate.log"), "w") as f:
        f.write(f"INFO:fairseq_cli.generate:Translated 3 sentences (40 tokens) in {seconds}s (x)\n")
    with open(os.path.join(directory, "generate-test.txt"), "w") as f:
        f.write("".join(f"S-{i}\tsrc\nH-{i}\t-0.5\thyp\n" for i in range(hypotheses)))


def _work_dir(tmp_path, lora_hypotheses: int = 3):
    for n, base in ((3, 1.0), (6, 2.0)):
        for variant, offset in (("zero-shot", 0.0), ("full", 0.5), ("lora", 0.25)):
            directory = tmp_path / "adapt" / f"N{n}" / variant
            _evaluation(
                str(directory / "eval-test"), base + offset, 1.5 * n, lora_hypotheses if variant == "lora" else 3
            )
            if variant != "zero-shot":
                trained = 1000 * n if variant == "full" else 100 * n
                (directory / "train.log").write_text(
                    f"x | num. shared model params: {1000 * n:,} (num. trained: {trained:,})\n"
                )
    (tmp_path / "test.es").write_text("a\nb\nc\n")


def _table(tmp_path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [
            sys.executable,
            os.path.join(ADAPTATION, "table.py"),
            "--work-dir",
            str(tmp_path),
            "--steps",
            "6",
            "--step-counts",
            "3",
            "6",
            "--ref",
            str(tmp_path / "test.es"),
        ],
        capture_output=True,
        text=True,
        env=dict(os.environ, PYTHONPATH=ROOT),  # as examples/lib.sh sets it
    )


def test_adaptation_table_has_every_variant_of_every_step_count(tmp_path):
    _work_dir(tmp_path)
    result = _table(tmp_path)
    assert result.returncode == 0, result.stderr
    assert "| 3 | 3 | 1.00 | 1.50 | 1.25 | 3,000 / 300 | 4.5 / 4.5 / 4.5 |" in result.stdout
    assert "| 6 (= N) | 6 | 2.00 | 2.50 | 2.25 | 6,000 / 600 | 9.0 / 9.0 / 9.0 |" in result.stdout


def test_adaptation_table_refuses_a_model_that_left_test_sentences_untranslated(tmp_path):
    _work_dir(tmp_path, lora_hypotheses=2)
    result = _table(tmp_path)
    assert result.returncode == 1 and "has 2 hypotheses for 3 references" in result.stderr
