"""NFE protocol of adaptive solvers, step-score files, and their figures."""
from __future__ import annotations

import json

import pytest
import torch
from torch import nn

from ode_seq.analysis.plots import plot_nfe_vs_length, plot_score_vs_steps
from ode_seq.analysis.solver_counts import nfe_against_length, nfe_modules, read_step_scores

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


class LengthCountingSolve(nn.Module):
    """Reports nfe = 6 + 2·(source length), as an adaptive solve taking more steps would."""

    def forward(self, src_tokens: torch.Tensor, src_lengths: torch.Tensor) -> torch.Tensor:
        self.nfe = 6 + 2 * src_tokens.size(1)
        return src_tokens


class EncoderWithAdaptiveSolves(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.solves = nn.ModuleList([LengthCountingSolve(), LengthCountingSolve()])
        for solve in self.solves:
            solve.nfe = 0

    def forward(self, src_tokens, src_lengths):
        for solve in self.solves:
            solve(src_tokens, src_lengths)


def test_nfe_is_summed_over_reporting_modules_for_each_sentence():
    model = nn.Module()
    model.encoder = EncoderWithAdaptiveSolves()
    assert len(nfe_modules(model.encoder)) == 2
    lengths, nfe = nfe_against_length(model, [torch.arange(3), torch.arange(8)])
    assert lengths == [3, 8] and nfe == [2 * 12, 2 * 22]


def test_step_scores_file_is_validated(tmp_path):
    good = tmp_path / "good.json"
    good.write_text(json.dumps({"steps": [6, 12], "scores": [20.5, 21.0], "metric": "BLEU"}))
    assert read_step_scores(str(good)) == {"steps": [6, 12], "scores": [20.5, 21.0],
                                           "metric": "BLEU"}
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"steps": [6, 12], "scores": [20.5]}))
    with pytest.raises(ValueError, match="equally long, non-empty lists"):
        read_step_scores(str(bad))


def test_solver_figures_are_written_as_png(tmp_path):
    plot_nfe_vs_length([3, 8, 12], [20, 26, 38], str(tmp_path / "nfe.png"))
    plot_score_vs_steps([12, 6, 24], [21.0, 18.5, 21.4], "BLEU", str(tmp_path / "steps.png"))
    for name in ("nfe.png", "steps.png"):
        assert (tmp_path / name).read_bytes()[:8] == PNG_SIGNATURE
