"""Token Lyapunov exponents of real model blocks: exact replay, skipping DLCL, greedy targets."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from ode_seq.analysis.token_sensitivity import (
    block_map,
    capture_block_calls,
    greedy_target,
    sentence_sensitivity,
    step_maps,
)
from ode_seq.layers.time_weights import TimeEmbedding
from tests.analysis.test_lyapunov import finite_difference_exponents
from tests.conftest import build_model
from tests.numerics import LayerEvaluations, assert_equal_up_to_rounding

TIME = dict(time_features=8, time_hidden_dim=16, time_embed_dim=4)


def _source(task, n: int = 6) -> torch.Tensor:
    d = task.source_dictionary
    return torch.cat([torch.arange(d.nspecial, d.nspecial + n - 1), torch.tensor([d.eos()])])


@pytest.mark.numerics
def test_replayed_block_maps_reproduce_the_encoder_states(task):
    model = build_model("ode_transformer_rk2_learned", task).eval()
    source = _source(task)[None]
    prev = torch.tensor([[task.target_dictionary.eos(), 7, 8, 9]])
    calls = capture_block_calls(model, source, prev)
    assert len(calls["encoder"]) == len(calls["decoder"]) == 2
    with torch.no_grad():
        states = model.encoder(source, torch.tensor([6]), return_all_hiddens=True)["encoder_states"]
        x = calls["encoder"][0][1][0].squeeze(1)
        assert torch.equal(x, states[0].squeeze(1))  # the captured input is the embedded source
        with LayerEvaluations(model.encoder) as evaluations:
            for call, expected in zip(calls["encoder"], states[1:]):
                x = block_map(*call)(x)
                assert_equal_up_to_rounding(x, expected.squeeze(1), evaluations.count)


def test_sentence_sensitivity_scores_every_token_and_skips_layer_history(task):
    model = build_model("ode_transformer_rk2", task, encoder_layer_history="dense").eval()
    target = torch.tensor([7, 8, 9])
    names = lambda i, side: f"{side[0]}{i}"  # noqa: E731
    result = sentence_sensitivity(model, _source(task), target, names, num_exponents=3)
    assert result["encoder"].result is None and "layer history" in result["encoder"].skipped
    decoder = result["decoder"]
    assert decoder.tokens == ["t2", "t7", "t8", "t9"]
    assert decoder.result.exponents.shape == (4, 3)
    assert decoder.result.running_max.shape == (2, 4)
    assert torch.isfinite(torch.from_numpy(decoder.result.scores)).all()


def test_greedy_target_stops_at_eos_or_length_limit(task):
    model = build_model("ode_transformer_rk2_learned", task).eval()
    eos = task.target_dictionary.eos()
    target = greedy_target(model, _source(task), eos, max_len=5)
    assert target.dim() == 1 and target.numel() <= 5 and eos not in target.tolist()


def _time_dependent_model(task, steps: int):
    """A tiny non-autonomous model (float64) whose weights really change with τ."""
    model = (
        build_model(
            "ode_transformer_nonauto_small",
            task,
            **TIME,
            encoder_ode_steps=steps,
            decoder_ode_steps=steps,
        )
        .eval()
        .double()
    )
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for network in model.modules():
            if isinstance(network, TimeEmbedding):
                network.lin2.weight.copy_(torch.randn(network.lin2.weight.shape, generator=g, dtype=torch.float64))
    return model


def test_token_exponents_of_a_tiny_model_match_finite_differences_of_its_steps(task):
    model = _time_dependent_model(task, steps=3)
    source, target = _source(task), torch.tensor([7, 8, 9])
    result = sentence_sensitivity(model, source, target, lambda i, side: str(i))
    prev = torch.cat([torch.tensor([task.target_dictionary.eos()]), target])
    calls = capture_block_calls(model, source[None], prev[None])
    # fairseq's cross-attention softmax runs in float32 even in a float64 model
    # (fairseq.utils.softmax), so the decoder's differences need a larger step.
    for side, eps, tolerance in (("encoder", 1e-6, 1e-7), ("decoder", 1e-3, 1e-4)):
        steps = [s for call in calls[side] for s in step_maps(*call)]
        assert len(steps) == 3 and all(dt == 2 / 3 for _, dt in steps)  # 2 layers, 3 Euler steps
        x0 = calls[side][0][1][0].squeeze(1).detach().numpy()
        expected = finite_difference_exponents([f for f, _ in steps], x0, dt=2 / 3, eps=eps)
        np.testing.assert_allclose(result[side].result.exponents, expected, rtol=0, atol=tolerance)


def test_token_exponents_converge_as_the_step_count_grows(task):
    # Every factor is I + O(h), so refining the grid changes the scores at first order.
    scores = {}
    for steps in (4, 8, 16):
        model = _time_dependent_model(task, steps)
        sensitivity = sentence_sensitivity(model, _source(task), torch.tensor([7, 8]), lambda i, side: str(i))
        scores[steps] = sensitivity["encoder"].result.scores
    coarse, fine = np.abs(scores[8] - scores[4]).max(), np.abs(scores[16] - scores[8]).max()
    assert fine <= 0.7 * coarse and fine < 0.05, (coarse, fine)
