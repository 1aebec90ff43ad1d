"""The installed `ode-seq` command, run as a user runs it: the venv's console script, from a directory
outside the repository (nothing of the checkout on the path but what the install put there)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import List

import pytest
import sacrebleu
import torch
from rouge_score import rouge_scorer

import ode_seq
from ode_seq.checkpoint_files import load_checkpoint, save_checkpoint
from ode_seq.cli.main import SUBCOMMANDS
from tests.metrics.test_m2 import OFFICIAL_GOLD, OFFICIAL_SYSTEM

ROOT = Path(__file__).resolve().parents[2]
ODE_SEQ = Path(sys.executable).parent / "ode-seq"
ENV = {**{k: v for k, v in os.environ.items() if k != "PYTHONPATH"}, "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore"}

pytestmark = pytest.mark.skipif(
    not ODE_SEQ.exists(),
    reason=f"ode-seq is not installed next to {sys.executable}: "
    "bash scripts/setup.sh installs the checkout (pip install --no-deps -e .) with its command",
)


def ode_seq_command(args: List[str], cwd: Path, returncode: int = 0) -> subprocess.CompletedProcess:
    result = subprocess.run([str(ODE_SEQ), *args], cwd=cwd, capture_output=True, text=True, env=ENV)
    assert result.returncode == returncode, result.stdout + result.stderr[-3000:]
    return result


def write_lines(path: Path, lines: List[str]) -> str:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path.name


def test_help_lists_every_subcommand_with_one_line_and_version_is_the_package_version(tmp_path):
    listing = ode_seq_command(["--help"], tmp_path).stdout
    for name, summary in SUBCOMMANDS.items():
        assert re.search(rf"^  {re.escape(name)} +{re.escape(summary)}$", listing, re.M), name
    assert ode_seq_command(["--version"], tmp_path).stdout == f"ode-seq {ode_seq.__version__}\n"


@pytest.mark.parametrize("name", sorted(SUBCOMMANDS))
def test_every_subcommand_shows_its_tools_help_under_its_own_name(tmp_path, name):
    usage = ode_seq_command([name, "--help"], tmp_path).stdout
    prog = f"ode-seq {name}"
    assert usage.startswith(f"usage: {prog} [-h]"), usage[:200]


def test_unknown_or_missing_subcommand_is_a_usage_error_naming_the_choices(tmp_path):
    wrong = ode_seq_command(["blue", "--hyp", "h"], tmp_path, returncode=2).stderr
    assert "ode-seq: error: argument SUBCOMMAND: invalid choice: 'blue'" in wrong and "'bleu'" in wrong
    assert "name a subcommand" in ode_seq_command([], tmp_path, returncode=2).stderr


def test_user_dir_is_the_installed_plugin_and_fairseq_loads_it_from_anywhere(tmp_path):
    plugin = ode_seq_command(["user-dir"], tmp_path).stdout.strip()
    assert plugin == str(ROOT / "user_dir")  # an editable install: the checkout is what runs
    # fairseq-train's help lists the criteria registered by then: the plugin's among them.
    train_help = subprocess.run(
        [sys.executable, "-m", "fairseq_cli.train", "--user-dir", plugin, "--help"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=ENV,
    )
    assert train_help.returncode == 0, train_help.stderr[-3000:]
    assert re.search(r"--criterion \{[^}]*,ode_trajectory_distillation\}", train_help.stdout)


HYPOTHESES = ["the cat sat on the mat .", "a dog runs in the park ."]
REFERENCES = ["the cat sat on a mat .", "the dog runs in the park ."]


def scores(tmp_path: Path, metric: str, *options: str) -> str:
    """What ``ode-seq METRIC --hyp FILE --ref FILE OPTIONS`` prints: :data:`HYPOTHESES` against :data:`REFERENCES`."""
    files = ["--hyp", write_lines(tmp_path / "hyp", HYPOTHESES), "--ref", write_lines(tmp_path / "ref", REFERENCES)]
    return ode_seq_command([metric, *files, *options], tmp_path).stdout


def test_bleu_scores_files_as_sacrebleu_does(tmp_path):
    out = scores(tmp_path, "bleu", "--lang", "en")
    expected = sacrebleu.corpus_bleu(HYPOTHESES, [REFERENCES]).score
    assert re.search(rf"^sacreBLEU 13a: +BLEU = {expected:.2f} ", out, re.M), out


def test_rouge_scores_files_as_rouge_score_does(tmp_path):
    out = scores(tmp_path, "rouge", "--bootstrap-samples", "10")
    scorer = rouge_scorer.RougeScorer(["rouge2"], use_stemmer=True)
    rouge2 = sum(scorer.score(r, h)["rouge2"].fmeasure for h, r in zip(HYPOTHESES, REFERENCES)) / 2
    assert re.search(rf"^ROUGE-2 +{100 * rouge2:.2f} ", out, re.M), out


def test_m2_gives_the_official_scorers_example(tmp_path):
    (tmp_path / "gold.m2").write_text(OFFICIAL_GOLD, encoding="utf-8")
    out = ode_seq_command(["m2", write_lines(tmp_path / "system.txt", OFFICIAL_SYSTEM), "gold.m2"], tmp_path)
    assert out.stdout == "Precision   : 0.8000\nRecall      : 0.8000\nF_0.5       : 0.8000\n"


def test_errant_scores_a_correction_against_references(tmp_path):
    out = ode_seq_command(
        [
            "errant",
            "--orig",
            write_lines(tmp_path / "orig", ["This are a sentence ."]),
            "--hyp",
            write_lines(tmp_path / "hyp", ["This is a sentence ."]),
            "--ref",
            write_lines(tmp_path / "ref", ["This is a sentence ."]),
        ],
        tmp_path,
    ).stdout
    assert re.search(r"^1\t0\t0\t1\.0\t1\.0\t1\.0$", out, re.M), out


def test_average_of_two_checkpoints_is_their_mean(tmp_path):
    first = load_checkpoint(str(ROOT / "tests" / "fixtures" / "checkpoints" / "rk4.pt"))
    second = {**first, "model": {k: 3 * v if v.is_floating_point() else v for k, v in first["model"].items()}}
    save_checkpoint(first, str(tmp_path / "checkpoint1.pt"))
    save_checkpoint(second, str(tmp_path / "checkpoint2.pt"))
    ode_seq_command(["average", "--inputs", "checkpoint1.pt", "checkpoint2.pt", "--output", "avg.pt"], tmp_path)
    averaged = load_checkpoint(str(tmp_path / "avg.pt"))["model"]
    for name, value in first["model"].items():  # (v + 3v) / 2 = 2v exactly, in any binary floating point
        assert torch.equal(averaged[name], 2 * value if value.is_floating_point() else value), name
