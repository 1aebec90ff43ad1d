"""Adaptive solves report (step, stage) through torchdiffeq's step hook, and every evaluation;
a solve that cannot finish stops with an error naming the method and the tolerances."""

import math

import pytest
import torch

from ode_seq.solvers import (
    ADAPTIVE_METHODS,
    AdaptiveSolveError,
    AdaptiveSolver,
    EvaluationCounter,
    ObserverGroup,
    SolveObserver,
)
from ode_seq.solvers.adaptive import padding_aware_rms


class Stages(SolveObserver):
    def __init__(self):
        self.seen = []

    def stage_evaluated(self, step, stage, t, z, k):
        self.seen.append((step, stage, t))


def test_evaluations_are_numbered_by_attempted_step_and_stage():
    for method, scheme in ADAPTIVE_METHODS.items():
        calls, stages, counter = [], Stages(), EvaluationCounter()

        def field(t, z, step, stage):
            calls.append((step, stage))
            return -z

        y = AdaptiveSolver(method, rtol=1e-6, atol=1e-8, interval=2.0).solve(
            field, torch.ones(3, dtype=torch.float64), ObserverGroup([stages, counter])
        )
        assert abs(y[0].item() - math.exp(-2.0)) < 1e-5
        assert calls == [(s, i) for s, i, _ in stages.seen] and counter.count == len(calls)
        assert calls[:2] == [(-1, 0), (-1, 1)]  # the slope at t = 0 and the first-step probe
        attempts = calls[-1][0] + 1
        per_step = scheme.evaluations_per_step
        assert calls[2:] == [(a, i) for a in range(attempts) for i in range(1, per_step + 1)]
        assert stages.seen[0][2] == 0.0 and max(t for _, _, t in stages.seen) >= 2.0 - 1e-6


def test_a_solve_stops_at_its_evaluation_limit_naming_the_method_and_the_tolerances():
    """Tolerances far below float32's precision: the solve would take 3,536 evaluations."""
    counter = EvaluationCounter()
    solver = AdaptiveSolver("dopri5", rtol=1e-12, atol=1e-12, max_evaluations=200)
    with pytest.raises(
        AdaptiveSolveError,
        match=(
            r"dopri5 with rtol 1e-12, atol 1e-12 \(torch.float32\) stopped at t = [\d.]+ of \[0, 1\] "
            r"\(step size [\d.e-]+\) after 200 field evaluations: the limit of 200 per solve"
        ),
    ):
        solver.solve(lambda t, y, step, stage: -y, torch.ones(4, 3), counter)
    assert counter.count == 200


def test_a_step_size_underflow_is_reported_with_the_method_and_the_tolerances():
    """y' = y² from y = 1 blows up at t = 1: the steps shrink until t + dt == t in float32."""
    with pytest.raises(
        AdaptiveSolveError,
        match=(
            r"dopri5 with rtol 0.001, atol 0.0001 \(torch.float32\) stopped at t = 0.9999 of \[0, 2\] "
            r".* the step size underflowed \(underflow in dt"
        ),
    ):
        AdaptiveSolver("dopri5", interval=2.0).solve(lambda t, y, step, stage: y * y, torch.ones(4, 3))


@pytest.mark.parametrize("padded", [False, True])
def test_error_norm_is_computed_in_float32_for_half_precision_states(padded):
    """An error ratio of 300 squares to 90,000, beyond float16's largest value (65,504)."""
    ratio = torch.full((3, 2, 4), 300.0, dtype=torch.float16)
    mask = torch.zeros(2, 3, dtype=torch.bool) if padded else None
    norm = padding_aware_rms(mask)(ratio)
    assert norm.dtype == torch.float32 and norm.item() == 300.0
