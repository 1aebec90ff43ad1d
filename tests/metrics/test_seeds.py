"""Statistics over seeds as the study tables report them (ode_seq/metrics/seeds.py)."""

from __future__ import annotations

from dataclasses import dataclass

from ode_seq.metrics.seeds import mean_or_none, mean_sd, pairs_by_seed


@dataclass
class Run:
    seed: int
    score: float


def test_mean_sd_is_the_mean_and_the_sample_standard_deviation():
    # mean 2, Σ(x − x̄)² = 2 over K − 1 = 2 seeds: s = 1 (the population's would be 0.816)
    assert mean_sd([1.0, 2.0, 3.0]) == "2.00 ± 1.00"
    assert mean_sd([1.0, 2.0, 3.0], digits=3) == "2.000 ± 1.000"


def test_one_seed_says_so_and_none_is_an_empty_cell():
    assert mean_sd([26.954]) == "26.95 (1 seed)"
    assert mean_sd([]) == ""


def test_a_mean_over_no_seed_is_none():
    assert mean_or_none(x for x in [4.0, 5.0]) == 4.5
    assert mean_or_none(x for x in []) is None


def test_runs_pair_with_the_baseline_of_their_seed_in_their_own_order():
    runs = [Run(3, 1.0), Run(1, 2.0), Run(2, 3.0)]
    baselines = [Run(1, 10.0), Run(3, 30.0)]
    assert [(run.seed, base.score) for run, base in pairs_by_seed(runs, baselines)] == [(3, 30.0), (1, 10.0)]
