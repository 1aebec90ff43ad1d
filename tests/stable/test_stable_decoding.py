"""Stable decoder blocks: incremental decoding equals the full forward pass; beam search."""

import pytest

from tests.conftest import TinyTask, assert_beam_search_with_caches_equals_prefix_recomputation, build_model
from tests.numerics import assert_incremental_decoding_equals_full_forward

pytestmark = pytest.mark.numerics


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
    )
    assert_incremental_decoding_equals_full_forward(model.double().eval(), task, [6, 3, 8, 5], seed=4)


def test_stable_beam_search_with_caches_equals_prefix_recomputation():
    task = TinyTask()
    model = build_model(
        "stable_ode_transformer_l2_small",
        task,
        decoder_ode_method="rk4",
        decoder_ode_steps=2,
        seed=7,
    )
    assert_beam_search_with_caches_equals_prefix_recomputation(model.double().eval(), task, beam=4, max_len_b=10)
