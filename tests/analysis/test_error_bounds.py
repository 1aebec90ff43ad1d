"""Euler's global error bound (ODE-ViT): the formula, its estimates from a trajectory and from
weight norms, and the measured error it bounds."""

from __future__ import annotations

import math

import pytest
import torch

from ode_seq.analysis.error_bounds import (
    block_error_bounds,
    euler_error_bound,
    trajectory_estimates,
    weight_lipschitz,
)
from ode_seq.analysis.token_sensitivity import capture_block_calls
from tests.conftest import TinyTask, build_model, random_batch


@pytest.mark.parametrize("lipschitz, steps", [(0.7, 6), (2.5, 24)])
def test_bound_at_unit_interval_is_odevits_formula(lipschitz, steps):
    m = 3.2
    expected = (math.exp(lipschitz) - 1) / (2 * lipschitz * steps) * m
    assert euler_error_bound(lipschitz, 1.0, 1 / steps, m) == pytest.approx(expected, rel=1e-12)
    assert euler_error_bound(0.0, 2.0, 0.5, m) == pytest.approx(2.0 * 0.5 * m / 2)  # the L → 0 limit


def test_trajectory_estimates_are_second_differences_and_lipschitz_quotients():
    # Euler on y' = A y: the slopes' differences are A (y_n − y_{n−1}), so the quotient is at most ‖A‖₂.
    g = torch.Generator().manual_seed(0)
    a = torch.randn(3, 3, generator=g, dtype=torch.float64)
    y = torch.randn(4, 2, 3, generator=g, dtype=torch.float64)  # 4 tokens, 2 sentences
    keep = torch.tensor([[True, True], [True, True], [True, False], [True, False]])
    h, states, slopes = 0.25, [], []
    for _ in range(5):
        states.append(y)
        slopes.append(y @ a.T)
        y = y + h * slopes[-1]
    states.append(y)
    estimates = trajectory_estimates(states[:-1], slopes, h, keep)
    for b in range(2):
        rows = keep[:, b]
        second = max(
            (states[n + 1][rows, b] - 2 * states[n][rows, b] + states[n - 1][rows, b]).norm() / h**2
            for n in range(1, 5)
        )
        quotients = [
            (slopes[n][rows, b] - slopes[n - 1][rows, b]).norm() / (states[n][rows, b] - states[n - 1][rows, b]).norm()
            for n in range(1, 5)
        ]
        assert estimates["second_derivative"][b].item() == pytest.approx(second.item(), rel=1e-12)
        assert estimates["lipschitz"][b].item() == pytest.approx(max(quotients).item(), rel=1e-12)
        assert estimates["lipschitz"][b] <= torch.linalg.matrix_norm(a, ord=2) + 1e-12


def test_weight_lipschitz_of_a_new_stable_block_is_two_centre_norm_constants():
    # Spectral-norm-1 projections, γ = 1, ReLU: each sublayer is Lipschitz D/(D−1), the parallel
    # field the sum of both (cross-attention reads the encoder, so it adds nothing).
    model = build_model("stable_ode_transformer_small", None)
    d = 32
    for stack in (model.encoder, model.decoder):
        assert weight_lipschitz(stack.layers[0]) == pytest.approx(2 * d / (d - 1), rel=1e-4)
    assert weight_lipschitz(build_model("ode_transformer_euler_small", None).encoder.layers[0]) is None


def _error_bounds(arch: str, lengths, **overrides):
    """block_error_bounds of the first block of each stack on a random batch."""
    task = TinyTask()
    model = build_model(arch, task, seed=2, **overrides).eval()
    src, src_lengths, prev = random_batch(task, lengths, seed=1)
    calls = capture_block_calls(model, src, prev, src_lengths)
    pad = task.source_dictionary.pad()
    return {
        side: block_error_bounds(calls[side][0], tokens.ne(pad).T)
        for side, tokens in (("encoder", src), ("decoder", prev))
    }


def test_measured_error_and_bound_fall_at_first_order_in_the_step_size():
    coarse, fine = (
        _error_bounds("stable_ode_transformer_small", [7, 5, 6], encoder_ode_steps=n, decoder_ode_steps=n)
        for n in (4, 8)
    )
    for side in ("encoder", "decoder"):
        ratio = fine[side]["measured_error"]["max"] / coarse[side]["measured_error"]["max"]
        assert 0.35 < ratio < 0.65, (side, ratio)
        bound_ratio = fine[side]["bound_trajectory"]["max"] / coarse[side]["bound_trajectory"]["max"]
        assert 0.35 < bound_ratio < 0.65, (side, bound_ratio)
        assert coarse[side]["reference_steps"] == 64 and coarse[side]["sentences"] == 3


def test_blocks_the_bound_does_not_cover_are_skipped_with_the_reason():
    bounds = _error_bounds("ode_transformer_rk4_small", [4, 3])
    assert "forward Euler's" in bounds["encoder"]["skipped"]  # RK4
    assert "with 1 step(s)" in bounds["decoder"]["skipped"]  # one Euler step has no second difference
