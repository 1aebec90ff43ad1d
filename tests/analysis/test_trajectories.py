"""Trajectory recording through wrapped fields and hooks, on tiny ODE Transformers."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from ode_seq.analysis.trajectories import record_trajectories
from ode_seq.layers import ode_blocks
from tests.conftest import build_model, random_batch
from tests.numerics import assert_rows_sum_to_one

LENGTHS = [5, 3, 7]


def _net_input(task):
    src, lengths, prev = random_batch(task, LENGTHS)
    return {"src_tokens": src, "src_lengths": lengths, "prev_output_tokens": prev}


def _decoder_tokens(net_input, pad: int) -> int:
    return int(net_input["prev_output_tokens"].ne(pad).sum())


def test_recording_leaves_model_outputs_unchanged_and_removes_its_observers(task):
    model = build_model("ode_transformer_rk2_learned", task).eval()
    net_input = _net_input(task)
    with torch.no_grad():
        before = model(**net_input)[0]
    records = record_trajectories(model, net_input, task.source_dictionary.pad())
    with torch.no_grad():
        after = model(**net_input)[0]
    assert torch.equal(before, after)
    assert len(records["encoder"]) == len(records["decoder"]) == 2
    for block in ode_blocks(model.encoder) + ode_blocks(model.decoder):
        assert block.observer() is None


def test_stage_inputs_follow_the_rk4_tableau_along_depth(task):
    model = build_model("ode_transformer_rk4_encdec", task).eval()
    pad = task.source_dictionary.pad()
    records = record_trajectories(model, _net_input(task), pad)
    first, second = records["encoder"]
    assert first.stage_times == [0.0, 0.5, 0.5, 1.0] and second.stage_times == [1.0, 1.5, 1.5, 2.0]
    assert first.state_in.shape == (sum(LENGTHS),) and len(first.stage_outputs) == 4
    # Stage 1 starts at the block input; block 2 starts where block 1 ended (no layer history).
    np.testing.assert_array_equal(first.stage_inputs[0], first.state_in)  # one state, recorded twice
    np.testing.assert_array_equal(second.state_in, first.state_out)
    stats = first.statistics()
    assert stats["coefficients"] == "fixed" and "gate" not in stats
    assert stats["mean_weights"] == pytest.approx([1 / 6, 1 / 3, 1 / 3, 1 / 6])
    assert stats["effective_step_size"] == pytest.approx(1.0)


@pytest.mark.numerics
def test_gate_values_are_recorded_per_non_pad_token_and_sum_to_one(task):
    model = build_model("ode_transformer_rk2_learned", task).eval()
    net_input = _net_input(task)
    records = record_trajectories(model, net_input, task.source_dictionary.pad())
    block = records["encoder"][1]
    assert block.coefficients == "gate" and block.weights.shape == (sum(LENGTHS), 2)
    assert_rows_sum_to_one(block.weights)
    stats = block.statistics()
    assert sum(stats["gate"]["histograms"][0]) == sum(LENGTHS)
    assert stats["effective_step_size"] == pytest.approx(1.0, abs=1e-6)
    decoder = records["decoder"][0]
    assert decoder.coefficients == "fixed" and decoder.method == "euler"
    assert decoder.state_in.shape == (_decoder_tokens(net_input, task.source_dictionary.pad()),)


def test_free_weights_give_their_sum_as_effective_step_size(task):
    model = build_model("ode_transformer_rk2", task, ode_coefficients="free").eval()
    block = ode_blocks(model.encoder)[0]
    with torch.no_grad():
        block.combiner.w.copy_(torch.tensor([0.3, 0.9]))
    records = record_trajectories(model, _net_input(task), task.source_dictionary.pad())
    stats = records["encoder"][0].statistics()
    assert stats["coefficients"] == "free"
    assert stats["mean_weights"] == pytest.approx([0.3, 0.9])
    assert stats["effective_step_size"] == pytest.approx(1.2)


def test_ema_weights_give_one_minus_power_of_one_minus_beta_as_effective_step_size(task):
    # PCformer's w_i = β(1−β)^{s−i} sum to 1 − (1−β)^s: 0.9375 for RK4 at β = 0.5.
    model = build_model("ode_transformer_rk4", task, ode_coefficients="ema").eval()
    records = record_trajectories(model, _net_input(task), task.source_dictionary.pad())
    stats = records["encoder"][0].statistics()
    assert stats["coefficients"] == "ema"
    assert stats["mean_weights"] == pytest.approx([1 / 16, 1 / 8, 1 / 4, 1 / 2])
    assert stats["effective_step_size"] == pytest.approx(0.9375)


def test_predictor_corrector_blocks_record_the_corrector_after_the_predictor_stages_and_the_ema_weights(task):
    model = build_model("pcformer_small", task, encoder_ode_method="heun", encoder_layers=2).eval()
    first, second = record_trajectories(model, _net_input(task), task.source_dictionary.pad())["encoder"]
    assert first.stage_times == [0.0, 1.0, 1.0] and first.stage_indices == [0, 1, 2]  # k_1, k_2, F(P)
    assert second.stage_times == [1.0, 2.0, 2.0] and first.stages == 3
    assert first.statistics()["mean_weights"] == pytest.approx([0.25, 0.5])  # EMA at β = 0.5
