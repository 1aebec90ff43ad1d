"""The report in-process: figures a model lacks the subject of are skipped with a reason."""

from __future__ import annotations

import json

import pytest
import torch

from ode_seq.analysis.report import AnalysisInputs, write_report
from tests.conftest import build_model, random_batch


def _inputs(model, task) -> AnalysisInputs:
    src, lengths, prev = random_batch(task, [4, 6])
    d = task.source_dictionary
    return AnalysisInputs(
        model=model.eval(),
        batch={"net_input": {"src_tokens": src, "src_lengths": lengths, "prev_output_tokens": prev}},
        pad=d.pad(),
        source=torch.tensor([5, 6, 7, d.eos()]),
        target=torch.tensor([8, 9]),
        token_string=lambda i, side: d[i],
    )


def _figures(out_dir) -> dict:
    return json.loads((out_dir / "report.json").read_text())["figures"]


def test_plain_fairseq_transformer_gets_spectra_and_lyapunov_but_no_trajectories(task, tmp_path):
    model = build_model("transformer", task)
    write_report(_inputs(model, task), str(tmp_path), {})
    figures = _figures(tmp_path)
    for name in ("trajectory", "coefficients", "gates"):
        assert figures[name] == {"skipped": "the model has no Runge-Kutta blocks"}
    for name in ("spectra_encoder", "spectra_decoder", "spectra_depth", "lyapunov"):
        assert figures[name] == f"{name}.png" and (tmp_path / f"{name}.png").is_file()


def test_layer_history_in_both_stacks_skips_the_lyapunov_figure(task, tmp_path):
    model = build_model(
        "ode_transformer_rk2", task, encoder_layer_history="dense", decoder_layer_history="learnable_dense"
    )
    write_report(_inputs(model, task), str(tmp_path), {"label": "dlcl"})
    report = json.loads((tmp_path / "report.json").read_text())
    reason = report["figures"]["lyapunov"]["skipped"]
    assert reason.startswith("encoder: layer history (DLCL)") and "; decoder: layer history" in reason
    assert report["label"] == "dlcl" and report["figures"]["trajectory"] == "trajectory.png"
    assert not (tmp_path / "lyapunov.png").exists()


@pytest.mark.parametrize(
    "arch, options, drawn",
    [
        ("ode_transformer_parallel_shared_dopri5", dict(encoder_share_group_size=2), "nfe_vs_length"),
        (
            "ode_transformer_nonauto_small",
            dict(time_features=4, time_hidden_dim=8, time_embed_dim=4, encoder_ode_steps=3),
            "spectra_depth",
        ),
        ("ode_transformer_rk2_learned", dict(encoder_ode_steps=2), "gates"),
    ],
)
def test_every_kind_of_solve_gets_its_report(task, tmp_path, arch, options, drawn):
    write_report(_inputs(build_model(arch, task, **options), task), str(tmp_path), {})
    figures = _figures(tmp_path)
    for name in ("trajectory", "spectra_encoder", "lyapunov", drawn):
        assert figures[name] == f"{name}.png" and (tmp_path / f"{name}.png").is_file()
