"""Stable decoder blocks: incremental decoding equals the full forward pass; beam search."""

import pytest

from tests.conftest import (
    TinyTask,
    assert_same_hypotheses,
    beam_search_with_and_without_caches,
    build_model,
    incremental_decoding_error,
)


@pytest.mark.parametrize("kernel", ["dot", "l2"])
@pytest.mark.parametrize(
    "method, steps, options",
    [
        ("euler", 5, {}),
        ("rk4", 2, {}),
        ("heun", 3, {"spectral_norm_constraint": True, "ode_field": "residual-branch"}),
    ],
)
def test_stable_incremental_decoding_equals_full_forward(kernel, method, steps, options):
    task = TinyTask()
    model = build_model(
        "stable_ode_transformer_small",
        task,
        attention_kernel=kernel,
        decoder_ode_method=method,
        decoder_ode_steps=steps,
        encoder_ode_method=method,
        **options,
    ).eval()
    assert incremental_decoding_error(model, task, [6, 3, 8, 5], seed=4) <= 1e-5


def test_stable_beam_search_with_caches_equals_prefix_recomputation():
    task = TinyTask()
    model = build_model(
        "stable_ode_transformer_l2_small",
        task,
        decoder_ode_method="rk4",
        decoder_ode_steps=2,
        seed=7,
    ).eval()
    for cached, recomputed in beam_search_with_and_without_caches(model, task, beam=4, max_len_b=10):
        assert_same_hypotheses(cached, recomputed)
