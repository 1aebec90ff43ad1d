"""NFE of adaptive solvers, step-score files, and their figures."""

from __future__ import annotations

import json
import re

import pytest
import torch

from ode_seq.analysis.plots import plot_nfe_vs_length, plot_score_vs_steps
from ode_seq.analysis.solver_counts import adaptive_blocks, nfe_against_length, read_step_scores
from tests.conftest import build_family_model, build_model

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def test_nfe_of_each_sentence_is_the_field_evaluations_of_its_adaptive_solve(task):
    model = build_family_model("dopri5, parallel field, shared weights", task).eval()
    (block,) = adaptive_blocks(model.encoder)
    evaluations = []
    block.fc1.register_forward_hook(lambda module, args, out: evaluations.append(1))
    sources = [torch.arange(4, 7), torch.arange(4, 15)]
    lengths, nfe = [], []
    for source in sources:
        evaluations.clear()
        lengths_one, nfe_one = nfe_against_length(model, [source])
        lengths += lengths_one
        nfe += nfe_one
        assert nfe_one == [len(evaluations)]
    assert lengths == [3, 11] and all(n >= 8 for n in nfe)
    assert adaptive_blocks(build_model("ode_transformer_rk4", task).encoder) == []


def test_step_scores_file_is_validated(tmp_path):
    good = tmp_path / "good.json"
    good.write_text(json.dumps({"steps": [6, 12], "scores": [20.5, 21.0], "metric": "BLEU"}))
    assert read_step_scores(str(good)) == {"steps": [6, 12], "scores": [20.5, 21.0], "metric": "BLEU"}
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"steps": [6, 12], "scores": [20.5]}))
    with pytest.raises(ValueError, match="equally long, non-empty lists"):
        read_step_scores(str(bad))


@pytest.mark.parametrize("text", ["{oops", "[6, 12]", '{"steps": ["six"], "scores": [20.5]}'])
def test_malformed_step_scores_file_is_refused_naming_the_file(tmp_path, text):
    path = tmp_path / "scores.json"
    path.write_text(text)
    with pytest.raises(ValueError, match=rf"{re.escape(str(path))}.*expected JSON"):
        read_step_scores(str(path))


def test_solver_figures_are_written_as_png(tmp_path):
    plot_nfe_vs_length([3, 8, 12], [20, 26, 38], str(tmp_path / "nfe.png"))
    plot_score_vs_steps([12, 6, 24], [21.0, 18.5, 21.4], "BLEU", str(tmp_path / "steps.png"))
    for name in ("nfe.png", "steps.png"):
        assert (tmp_path / name).read_bytes()[:8] == PNG_SIGNATURE
