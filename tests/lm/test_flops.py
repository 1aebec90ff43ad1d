"""Counted FLOPs (``ode_seq.analysis.flops``, ``ode-seq flops``): exact counts of a linear model, the
count of an ODE language model against the residual models with as many layer evaluations, and the
Pareto front."""

from __future__ import annotations

from typing import Any, Dict

import pytest
import torch
from torch import nn

from ode_seq.analysis.flops import FlopCount, count_flops, pareto_front
from ode_seq.cli.flops import first_training_batch_flops
from ode_seq.cli.main import main as ode_seq_main
from tests.lm.conftest import lm_training_args


class LinearModel(nn.Module):
    """y = W x + b over a (batch, d_in) input, with fairseq's ``get_normalized_probs``."""

    def __init__(self, d_in: int, d_out: int) -> None:
        super().__init__()
        self.linear = nn.Linear(d_in, d_out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x)

    def get_normalized_probs(self, output: torch.Tensor, log_probs: bool) -> torch.Tensor:
        return torch.log_softmax(output, dim=-1)


def test_a_linear_layer_costs_two_flops_per_multiply_add_forward_and_twice_that_backward() -> None:
    batch, d_in, d_out = 5, 7, 3
    model = LinearModel(d_in, d_out)
    x = torch.randn(batch, d_in)
    count = count_flops(model, lambda: model(x).square().sum(), {"x": x}, tokens=batch)
    forward = 2 * batch * d_in * d_out
    # backward: the input's gradient and the weight's gradient, each one product of the forward's size
    # (x needs no gradient here, so only the weight's is computed)
    assert count == FlopCount(tokens=batch, training=forward + forward, inference=forward)
    assert not model.training and all(p.grad is None for p in model.parameters())
    assert FlopCount.parse(count.lines(), "count") == count


def test_a_flop_count_that_is_not_one_is_refused_naming_the_file() -> None:
    with pytest.raises(ValueError, match="flops.txt is not a FLOP count of `ode-seq flops`.*delete it and rerun"):
        FlopCount.parse("tokens=12\ntraining_flops=oops\n", "flops.txt")


def test_the_pareto_front_keeps_the_runs_no_other_run_beats_on_cost_and_loss() -> None:
    points = [(4.0, 1.0), (1.0, 3.0), (2.0, 3.5), (2.0, 2.0), (3.0, 2.5), (5.0, 1.0)]
    assert pareto_front(points) == [1, 3, 0]


def _lm_flops(lm_data, arch: str, **options: Any) -> FlopCount:
    return first_training_batch_flops(lm_training_args(lm_data, arch, options))


def test_an_ode_lm_costs_what_the_residual_lm_with_as_many_layer_evaluations_costs(lm_data) -> None:
    """Heun on 2 layers evaluates 4 layers of the same shapes as a residual model of 4 layers; the
    counter sees the same products (Heun's combination is elementwise). Each further layer of the
    residual model adds the same count."""
    counts: Dict[str, FlopCount] = {
        "euler1": _lm_flops(lm_data, "ode_transformer_lm_euler", decoder_layers=1),
        "euler2": _lm_flops(lm_data, "ode_transformer_lm_euler", decoder_layers=2),
        "euler4": _lm_flops(lm_data, "ode_transformer_lm_euler", decoder_layers=4),
        "heun2": _lm_flops(lm_data, "ode_transformer_lm_rk2", decoder_layers=2),
    }
    assert len({c.tokens for c in counts.values()}) == 1  # the same first batch
    for kind in ("training", "inference"):
        value = {name: getattr(c, kind) for name, c in counts.items()}
        assert value["heun2"] == value["euler4"]
        assert value["euler4"] - value["euler2"] == 2 * (value["euler2"] - value["euler1"]) > 0
    assert counts["euler2"].training > 2 * counts["euler2"].inference  # a backward pass costs about two forwards


def test_ode_seq_flops_prints_the_count_of_a_fairseq_train_command_line(lm_data, capsys) -> None:
    args = lm_training_args(lm_data, "ode_transformer_lm_euler", {})
    assert ode_seq_main(["flops", *args]) == 0
    assert FlopCount.parse(capsys.readouterr().out, "stdout") == first_training_batch_flops(args)
