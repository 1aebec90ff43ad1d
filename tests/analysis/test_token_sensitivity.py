"""Token Lyapunov exponents of real model blocks: exact replay, skipping DLCL, greedy targets."""
from __future__ import annotations

import torch

from ode_seq.analysis.token_sensitivity import (
    block_map,
    capture_block_calls,
    greedy_target,
    sentence_sensitivity,
)
from tests.conftest import build_model


def _source(task, n: int = 6) -> torch.Tensor:
    d = task.source_dictionary
    return torch.cat([torch.arange(d.nspecial, d.nspecial + n - 1), torch.tensor([d.eos()])])


def test_replayed_block_maps_reproduce_the_encoder_states(task):
    model = build_model("ode_transformer_rk2_learned", task).eval()
    source = _source(task)[None]
    prev = torch.tensor([[task.target_dictionary.eos(), 7, 8, 9]])
    calls = capture_block_calls(model, source, prev)
    assert len(calls["encoder"]) == len(calls["decoder"]) == 2
    with torch.no_grad():
        states = model.encoder(source, torch.tensor([6]), return_all_hiddens=True)["encoder_states"]
        x = calls["encoder"][0][1][0].squeeze(1)
        torch.testing.assert_close(x, states[0].squeeze(1))
        for call, expected in zip(calls["encoder"], states[1:]):
            x = block_map(*call)(x)
            torch.testing.assert_close(x, expected.squeeze(1))


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
