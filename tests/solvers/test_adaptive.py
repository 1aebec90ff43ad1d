"""Adaptive solves report (step, stage) through torchdiffeq's step hook, and every evaluation."""
import math

import torch

from ode_seq.solvers import ADAPTIVE_METHODS, AdaptiveSolver, EvaluationCounter, ObserverGroup, SolveObserver


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
