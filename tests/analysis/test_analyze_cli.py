"""``python -m ode_seq.cli.analyze`` end to end on checkpoints trained by fairseq-train, both run in
this process (tests/install/test_ode_seq_command.py runs the ``ode-seq`` console script)."""

from __future__ import annotations

import json

import pytest

from ode_seq.cli.analyze import main
from testkit.in_process import run_in_process
from tests.e2e.cli import TINY_MODEL, TRAIN
from tests.e2e.corpus import CLI_SIZES, reversal_data_bin

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
MAX_PNG_BYTES = 200_000
ARCHS = ("ode_transformer_rk2_learned", "ode_transformer_rk4_encdec")


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    """Both architectures trained for a few updates by fairseq-train and analysed (both tools' entry
    points, in this process)."""
    root = tmp_path_factory.mktemp("analyze")
    data = reversal_data_bin(root, CLI_SIZES)
    (root / "steps.json").write_text(json.dumps({"steps": [2, 4, 8], "scores": [1.0, 2.5, 2.7], "metric": "BLEU"}))
    train = {
        arch: [
            "fairseq-train",
            [
                str(data),
                "--arch",
                arch,
                *TINY_MODEL,
                *TRAIN,
                "--max-update",
                "4",
                "--save-dir",
                str(root / arch),
                "--no-epoch-checkpoints",
                "--disable-validation",
            ],
        ]
        for arch in ARCHS
    }
    extra = {
        "ode_transformer_rk2_learned": ["--step-scores", str(root / "steps.json")],
        "ode_transformer_rk4_encdec": ["--sentence", "w1 w2 w3", "--max-sentences", "8"],
    }
    analyse = {
        arch: [
            "python",
            [
                "-m",
                "ode_seq.cli.analyze",
                "--path",
                str(root / arch / "checkpoint_last.pt"),
                "--data",
                str(data),
                "--out",
                str(root / f"report-{arch}"),
                *extra[arch],
            ],
        ]
        for arch in ARCHS
    }
    for arch in ARCHS:
        run_in_process(*train[arch], check=True)
        run_in_process(*analyse[arch], check=True)
    return {arch: root / f"report-{arch}" for arch in ARCHS}


def report_with_figures(directory, drawn, skipped):
    """The report.json in ``directory``, after checking that it drew the figures ``drawn`` (PNG files
    of a bounded size) and says why it skipped the figures ``skipped``."""
    report = json.loads((directory / "report.json").read_text())
    figures = report["figures"]
    assert sorted(n for n, v in figures.items() if isinstance(v, str)) == sorted(drawn)
    assert sorted(n for n, v in figures.items() if not isinstance(v, str)) == sorted(skipped)
    for name in drawn:
        png = (directory / f"{name}.png").read_bytes()
        assert png[:8] == PNG_SIGNATURE and len(png) < MAX_PNG_BYTES
    for name in skipped:
        assert figures[name]["skipped"]
    return report


SPECTRA = ["spectra_encoder", "spectra_decoder", "spectra_depth", "trajectory", "lyapunov"]


def test_learned_gate_model_gets_every_figure_and_its_numbers(reports):
    drawn, skipped = SPECTRA + ["coefficients", "gates", "score_vs_steps"], ["nfe_vs_length", "teacher_errors"]
    report = report_with_figures(reports["ode_transformer_rk2_learned"], drawn, skipped)
    assert "--teacher" in report["figures"]["teacher_errors"]["skipped"]
    bounds = report["euler_error_bounds"]
    assert "forward Euler's" in bounds["encoder"][0]["skipped"]  # heun blocks
    assert "1 step(s)" in bounds["decoder"][0]["skipped"]  # one Euler step per decoder layer
    assert "no adaptive solver" in report["figures"]["nfe_vs_length"]["skipped"]
    encoder = report["trajectories"]["encoder"]
    assert [b["method"] for b in encoder] == ["heun", "heun"]
    assert encoder[1]["stage_times"] == [1.0, 2.0]
    assert encoder[0]["effective_step_size"] == pytest.approx(1.0, abs=1e-5)
    assert len(encoder[0]["gate"]["histograms"]) == 2
    assert report["trajectories"]["decoder"][0]["coefficients"] == "fixed"
    layer = report["spectra"]["eigenvalues"]["decoder"][1]
    assert layer["depth"] == 1.0 and len(layer["cross_qk"]) == 2  # heads
    assert len(layer["cross_qk"][0]["real"]) == 16 and len(layer["ffn"]["imag"]) == 32
    lyapunov = report["lyapunov"]["encoder"]
    assert lyapunov["tokens"][-1] == "</s>" and lyapunov["position"] == len(lyapunov["tokens"]) - 1
    assert len(lyapunov["scores"]) == len(lyapunov["tokens"])
    assert len(lyapunov["running_max_by_step"]) == 2
    assert lyapunov["running_max_by_step"][-1] == pytest.approx(lyapunov["scores"])
    for leading, score in zip(lyapunov["leading_exponents"], lyapunov["scores"]):
        assert len(leading) == 8 and leading == sorted(leading, reverse=True)
        assert leading[0] == pytest.approx(score)
    assert report["score_vs_steps"]["steps"] == [2, 4, 8]
    assert report["sentence"]["from"] == "first pair of valid"


def test_fixed_coefficient_model_skips_gate_figures_with_a_note(reports):
    skipped = ["coefficients", "gates", "nfe_vs_length", "score_vs_steps", "teacher_errors"]
    report = report_with_figures(reports["ode_transformer_rk4_encdec"], SPECTRA, skipped)
    assert "fixed weights" in report["figures"]["coefficients"]["skipped"]
    assert report["figures"]["gates"]["skipped"] == "no learned gates (coefficients: fixed)"
    decoder = report["trajectories"]["decoder"]
    assert [len(b["stage_output_norm"]) for b in decoder] == [4, 4]
    assert report["lyapunov"]["encoder"]["tokens"] == ["w1", "w2", "w3", "</s>"]
    assert report["lyapunov"]["decoder"]["tokens"][0] == "</s>"
    assert report["sentence"] == {"from": "--sentence", "unknown_source_tokens": 0, "target": "greedy translation"}
    assert report["batch_sentences"] == 8


def test_missing_checkpoint_is_reported_with_exit_status_2(tmp_path, capsys):
    status = main(["--path", str(tmp_path / "none.pt"), "--data", str(tmp_path), "--out", str(tmp_path / "out")])
    assert status == 2
    assert f"--path {tmp_path / 'none.pt'} does not exist" in capsys.readouterr().err
