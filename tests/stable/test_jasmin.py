"""JaSMin on hand-computed attention rows, and the criterion that adds it to cross-entropy."""

import math

import pytest
import torch
from fairseq.criterions.label_smoothed_cross_entropy import LabelSmoothedCrossEntropyCriterion

from ode_seq.layers.stable.attention import AttentionRecord
from ode_seq.models.criteria.jasmin import (
    first_penalised_step,
    jasmin_penalty,
    jasmin_rows,
    trajectory_jasmin,
)
from ode_seq.models.criteria.jasmin_cross_entropy import JasminCrossEntropyCriterion
from tests.conftest import TinyTask, build_model
from tests.numerics import LayerEvaluations, assert_equal_up_to_rounding
from tests.stable.test_distillation import sample_for

# Sorted (0.5, 0.3, 0.2): g_1 = 0.5(1 − 0.5 + 0.3) = 0.4, g_2 = 0.3(1 − 0.3 + 0.2) = 0.27,
# g_3 = 0.2(1 − 0.2 + 0) = 0.16.
ROW = torch.tensor([0.2, 0.5, 0.3])


def _assert_log_ratio(value: torch.Tensor, expected: float) -> None:
    """A float32 JaSMin value log(g_1/g_k) against the exact one: a log of a ratio errs by the
    ratio's relative rounding, so the magnitude is 1; two reductions (the g's, the log of their ratio)."""
    exact = torch.tensor(expected, dtype=torch.float64)
    assert_equal_up_to_rounding(value.double(), exact, 2, torch.float32, magnitude=torch.ones(()))


@pytest.mark.numerics
def test_jasmin_row_penalty_is_log_g1_over_gk():
    _assert_log_ratio(jasmin_rows(ROW, k=2), math.log(0.4 / 0.27))
    _assert_log_ratio(jasmin_rows(ROW, k=3), math.log(0.4 / 0.16))
    _assert_log_ratio(jasmin_rows(ROW, k=10), math.log(0.4 / 0.16))


@pytest.mark.numerics
def test_uniform_rows_and_single_key_rows_have_zero_penalty():
    _assert_log_ratio(jasmin_rows(torch.full((5,), 0.2), k=2), 0.0)
    one_key = torch.tensor([1.0, 0.0, 0.0])
    _assert_log_ratio(jasmin_rows(one_key, k=2, available_keys=torch.tensor(1)), 0.0)


@pytest.mark.numerics
def test_rows_with_fewer_keys_than_k_use_their_last_available_key():
    two_keys = torch.tensor([0.7, 0.3, 0.0, 0.0])  # g_1 = 0.7 · 0.6, g_2 = 0.3 · 0.7
    _assert_log_ratio(jasmin_rows(two_keys, k=10, available_keys=torch.tensor(2)), math.log(0.42 / 0.21))


@pytest.mark.numerics
def test_penalty_is_max_over_non_padding_queries_and_mean_over_heads():
    uniform = torch.full((3,), 1 / 3)
    peaked = torch.tensor([0.9, 0.05, 0.05])  # g_1 = 0.9 · 0.15, g_2 = 0.05 · 1.0
    probs = torch.stack(
        [
            torch.stack([ROW, uniform]),  # head 1: max(log(0.4/0.27), 0)
            torch.stack([uniform, peaked]),  # head 2: query 2 is padding → 0
        ]
    ).unsqueeze(0)  # (B=1, H=2, T=2, S=3)
    padding = torch.tensor([[False, True]])
    expected = (math.log(0.4 / 0.27) + 0.0) / 2
    _assert_log_ratio(jasmin_penalty(probs, 2, padding), expected)
    unpadded = (math.log(0.4 / 0.27) + math.log(0.135 / 0.05)) / 2
    _assert_log_ratio(jasmin_penalty(probs, 2), unpadded)


def test_last_85_percent_of_steps_are_penalised():
    assert [first_penalised_step(n, 0.85) for n in (1, 6, 10, 20, 36)] == [0, 0, 1, 3, 5]
    with pytest.raises(ValueError, match=r"\(0, 1\]"):
        first_penalised_step(10, 0.0)


def _record(row):
    return AttentionRecord(row.view(1, 1, 1, -1), None, torch.tensor([[[row.numel()]]]))


@pytest.mark.numerics
def test_trajectory_jasmin_averages_evaluations_of_the_penalised_steps():
    peaked = torch.tensor([0.98, 0.01, 0.01])
    evaluations = [(0, _record(peaked))] + [(s, _record(ROW)) for s in range(1, 10)]
    value = trajectory_jasmin(evaluations, total_steps=10, k=2)
    _assert_log_ratio(value, math.log(0.4 / 0.27))  # step 0 is not penalised


def test_k_below_two_and_missing_attention_are_errors():
    with pytest.raises(ValueError, match="k >= 2"):
        jasmin_rows(ROW, k=1)
    with pytest.raises(ValueError, match="stable_ode_transformer"):
        trajectory_jasmin([], total_steps=4, k=2)


@pytest.mark.numerics
def test_jasmin_criterion_adds_the_weighted_penalty_to_label_smoothed_cross_entropy():
    task = TinyTask()
    model = build_model("stable_ode_transformer_l2_small", task).eval()
    sample = sample_for(task, [5, 7, 3])
    plain, n, _ = LabelSmoothedCrossEntropyCriterion(task, False, 0.1)(model, sample)
    with LayerEvaluations(model) as evaluations:
        loss, n_j, log = JasminCrossEntropyCriterion(task, False, 0.1, jasmin_weight=0.5)(model, sample)
    jasmin = log["jasmin"] / n
    assert n_j == n and 0 < jasmin.item() < 20
    assert_equal_up_to_rounding(loss, plain + 0.5 * n * jasmin, evaluations.count)
    with pytest.raises(ValueError, match="needs stable ODE blocks"):
        JasminCrossEntropyCriterion(task, False, 0.1)(build_model("ode_transformer_euler_small", task), sample)
    with pytest.raises(ValueError, match="--jasmin-k must be >= 2"):
        JasminCrossEntropyCriterion(task, False, 0.1, jasmin_k=1)
