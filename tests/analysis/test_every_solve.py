"""The analysis follows every kind of solve: multi-step blocks, weight-shared groups, learned gates
over several steps, adaptive solves and non-autonomous stacks."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from ode_seq.analysis.layer_weights import stack_weights
from ode_seq.analysis.spectra import FeedForwardWeights, feed_forward_eigenvalues, layer_spectra
from ode_seq.analysis.token_sensitivity import (
    capture_block_calls,
    multistep_maps,
    multistep_start,
    sentence_sensitivity,
    stack_sensitivity,
    step_maps,
)
from ode_seq.analysis.trajectories import record_trajectories
from tests.conftest import build_family_model, build_model, random_batch
from tests.numerics import LayerEvaluations, assert_equal_up_to_rounding, assert_rows_sum_to_one
from tests.test_predictor_corrector import pc_model

TIME = dict(time_features=4, time_hidden_dim=8, time_embed_dim=4)


def _net_input(task):
    src, lengths, prev = random_batch(task, [5, 3, 7])
    return {"src_tokens": src, "src_lengths": lengths, "prev_output_tokens": prev}


def _source(task, n: int = 6) -> torch.Tensor:
    d = task.source_dictionary
    return torch.cat([torch.arange(d.nspecial, d.nspecial + n - 1), torch.tensor([d.eos()])])


def _names(i: int, side: str) -> str:
    return f"{side[0]}{i}"


def _time_dependent(model, seed: int = 0):
    """Random time-MLP output weights, so θ(τ) really depends on τ."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for stack in (model.encoder, model.decoder):
            lin2 = stack.layers[0].time_embedding.lin2
            lin2.weight.copy_(torch.randn(lin2.weight.shape, generator=g))
            for module in stack.layers[0].theta.params.values():
                module.A.mul_(30.0)
    return model


def test_multi_step_block_trajectory_has_every_stage_of_every_step_at_its_time(task):
    model = build_model("ode_transformer_rk4", task, encoder_ode_steps=2).eval()
    first, second = record_trajectories(model, _net_input(task), task.source_dictionary.pad())["encoder"]
    assert first.stage_times == pytest.approx([0.0, 0.25, 0.25, 0.5, 0.5, 0.75, 0.75, 1.0])
    assert second.stage_times[0] == pytest.approx(1.0) and len(second.stage_outputs) == 8
    np.testing.assert_array_equal(second.state_in, first.state_out)  # one state, recorded twice


def test_weight_shared_groups_sit_at_their_depth_in_trajectories_spectra_and_lyapunov(task):
    model = build_model("ode_transformer_rk2", task, encoder_layers=4, encoder_share_group_size=2).eval()
    first, second = record_trajectories(model, _net_input(task), task.source_dictionary.pad())["encoder"]
    assert first.stage_times == pytest.approx([0.0, 1.0, 1.0, 2.0])
    assert second.stage_times == pytest.approx([2.0, 3.0, 3.0, 4.0])
    assert [w.depth for w in stack_weights(model.encoder)] == [0.0, 2.0]
    result = sentence_sensitivity(model, _source(task), torch.tensor([7, 8]), _names)["encoder"].result
    assert result.running_max.shape[0] == 4  # two steps of h = 1 in each of two blocks


@pytest.mark.numerics
def test_learned_gates_are_recorded_at_every_step_of_a_multi_step_block(task):
    model = build_model("ode_transformer_rk2_learned", task, encoder_ode_steps=3).eval()
    net_input = _net_input(task)
    tokens = int(net_input["src_tokens"].ne(task.source_dictionary.pad()).sum())
    block = record_trajectories(model, net_input, task.source_dictionary.pad())["encoder"][0]
    assert block.weights.shape == (3 * tokens, 2)
    assert_rows_sum_to_one(block.weights)
    assert len(block.stage_outputs) == 6


def test_adaptive_solve_is_reported_with_its_method_and_evaluations(task):
    model = build_family_model("dopri5, parallel field, shared weights", task).eval()
    evaluations = []
    model.encoder.layers[0].fc1.register_forward_hook(lambda m, args, out: evaluations.append(1))
    (block,) = record_trajectories(model, _net_input(task), task.source_dictionary.pad())["encoder"]
    stats = block.statistics()
    assert stats["method"] == "dopri5"
    assert stats["stages"] == 6  # evaluations per attempted step (7 stages, the first reused)
    assert stats["nfe"] == len(evaluations) == len(block.stage_outputs)
    assert block.stage_times[0] == 0.0 and max(block.stage_times) >= 2.0  # its last step passes T


def test_non_autonomous_stack_has_one_spectrum_per_step_with_that_step_s_weights(task):
    model = _time_dependent(
        build_model(
            "ode_transformer_nonauto_small",
            task,
            **TIME,
            encoder_layers=2,
            encoder_ode_steps=3,
        )
    ).eval()
    block = model.encoder.layers[0]
    spectra = [layer_spectra(w) for w in stack_weights(model.encoder)]
    assert [s["depth"] for s in spectra] == pytest.approx([2 / 3, 4 / 3, 2.0])  # θ at (n+1)/N
    for n, spectrum in enumerate(spectra):
        weights = block.weights_at((n + 1) / 3)
        expected = feed_forward_eigenvalues(FeedForwardWeights(weights["fc1.weight"].T, weights["fc2.weight"].T))
        np.testing.assert_allclose(spectrum["ffn"], expected, rtol=1e-6, atol=1e-9)
    assert not np.allclose(spectra[0]["ffn"], spectra[2]["ffn"])


@pytest.mark.numerics
def test_non_autonomous_lyapunov_maps_are_the_solver_steps(task):
    model = _time_dependent(
        build_model(
            "ode_transformer_nonauto_small",
            task,
            **TIME,
            encoder_ode_steps=4,
            decoder_ode_steps=2,
        )
    ).eval()
    source, target = _source(task), torch.tensor([7, 8, 9])
    result = sentence_sensitivity(model, source, target, _names)
    assert result["encoder"].result.running_max.shape[0] == 4
    assert result["decoder"].result.running_max.shape[0] == 2
    prev = torch.cat([torch.tensor([task.target_dictionary.eos()]), target])[None]
    (call,) = capture_block_calls(model, source[None], prev)["encoder"]
    x = call[1][0].squeeze(1)
    with torch.no_grad():
        expected = model.encoder.layers[0](*call[1], **call[2]).squeeze(1)
        with LayerEvaluations(model.encoder) as evaluations:
            for step, _ in step_maps(*call):
                x = step(x)
    assert_equal_up_to_rounding(x, expected, evaluations.count)


def test_predictor_corrector_maps_on_the_augmented_state_replay_the_stack_and_read_its_history(task):
    model = pc_model(encoder_ode_corrector_history=2)
    source, target = _source(task), torch.tensor([7, 8, 9])
    prev = torch.cat([torch.tensor([task.target_dictionary.eos()]), target])[None]
    calls = capture_block_calls(model, source[None], prev)["encoder"]
    y0 = calls[0][1][0].squeeze(1)
    z = multistep_start(y0, calls)
    assert z.shape == (6, 3 * y0.shape[-1])  # y and m = 2 first-stage values per token
    maps = [f for f, _ in multistep_maps(calls)]
    with torch.no_grad():
        expected = model.encoder(source[None], torch.tensor([6]), return_all_hiddens=True)["encoder_states"][-1]
        with LayerEvaluations(model.encoder) as evaluations:
            states = [z]
            for f in maps:
                states.append(f(states[-1]))
    assert_equal_up_to_rounding(states[-1][:, : y0.shape[-1]], expected.squeeze(1), evaluations.count)
    # the history slots are read from the stack's second step on, and only then
    bumped = [z.clone() for z in states]
    for z in bumped:
        z[:, y0.shape[-1] :] += 0.1
    with torch.no_grad():
        assert torch.equal(maps[0](bumped[0]), states[1])
        assert not torch.equal(maps[2](bumped[2])[:, : y0.shape[-1]], states[3][:, : y0.shape[-1]])
    result = sentence_sensitivity(model, source, target, _names, num_exponents=3)["encoder"].result
    assert result.exponents.shape == (6, 3) and np.isfinite(result.exponents).all()
    assert result.running_max.shape == (len(maps), 6)


def test_token_sensitivity_skips_the_dlcl_corrector_naming_it(task):
    model = build_model("pcformer_small", task, encoder_ode_method="heun", encoder_ode_corrector="dlcl")
    skipped = stack_sensitivity(model.encoder, [], ["w1"], None).skipped
    assert skipped and "DLCL corrector" in skipped and "--*-ode-corrector dlcl" in skipped
