"""Paired bootstrap resampling (Koehn 2004) between a system S and a baseline B on one test set.

The conventions are sacreBLEU's ``--paired-bs`` (``sacrebleu/significance.py``), so BLEU (computed
by sacreBLEU itself) and our ROUGE, M2 and ERRANT comparisons read the same way:

* Resamples: R sets of N test items drawn with replacement, the same sets for S and B —
  ``numpy.random.default_rng(seed).choice(N, size=(R, N))``, R = 1000 and seed 12345 by default
  (sacreBLEU's default ``SACREBLEU_SEED``). On resample r each metric's corpus-level score S_r, B_r
  is recomputed from the items' sufficient statistics (n-gram counts, per-summary scores, edit
  counts), exactly as the metric scores a whole test set.
* 95 % confidence interval of a system: μ ± h with μ = mean_r S_r and, for the sorted S_(0..R−1),
  h = (S_(R−1−⌊R/40⌋) − S_(⌊R/40⌋)) / 2.
* Two-sided p-value of the observed difference δ = |S − B| on the whole test set, with
  δ_r = |S_r − B_r| recentred on its bootstrap mean (the null hypothesis of no difference):

      p = (1 + #{r : δ_r − mean_r' δ_r' > δ}) / (R + 1).

  The +1 keeps p ≥ 1 / (R + 1): with R = 1000 no difference is reported below p ≈ 0.001.
  One departure: sacreBLEU's formula gives two outputs that score the same on every resample
  (e.g. a system and itself) p = 1 / (R + 1), "significant"; here they get p = 1 (for BLEU, which
  sacreBLEU computes: identical outputs).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Sequence

import numpy as np

DEFAULT_SAMPLES = 1000
DEFAULT_SEED = 12345
P_VALUE_DEFINITION = (
    "two-sided: (1 + #{r : |S_r - B_r| - mean_r|S_r - B_r| > |S - B|}) / (R + 1); 1 when S_r = B_r on every resample"
)
INTERVAL_DEFINITION = "bootstrap mean ± half the spread of the central 95% of the resampled scores"


class PairedInputError(ValueError):
    """Two outputs that cannot be compared; the message names the problem and the fix."""


def resample_indices(n_items: int, n_samples: int = DEFAULT_SAMPLES, seed: int = DEFAULT_SEED) -> np.ndarray:
    """(n_samples, n_items) item indices drawn with replacement, as sacreBLEU draws them."""
    if n_items < 1:
        raise PairedInputError("no test items to resample: the outputs are empty")
    return np.random.default_rng(seed).choice(n_items, size=(n_samples, n_items), replace=True)


def draw_counts(indices: np.ndarray) -> np.ndarray:
    """(R, N) matrix c with c_ri the number of times item i is drawn in resample r, so that a
    resampled sum of per-item statistics x is c @ x."""
    n_samples, n_items = indices.shape
    offsets = n_items * np.arange(n_samples)[:, None]
    return (
        np.bincount((indices + offsets).ravel(), minlength=n_samples * n_items)
        .reshape(n_samples, n_items)
        .astype(np.float64)
    )


@dataclass(frozen=True)
class Estimate:
    """A corpus score on the whole test set, and the bootstrap mean ± 95 % half width."""

    score: float
    mean: float
    half_width: float

    @classmethod
    def from_resamples(cls, score: float, resampled: np.ndarray) -> "Estimate":
        ordered = np.sort(resampled)
        lower = len(ordered) // 40
        return cls(
            float(score), float(ordered.mean()), float(0.5 * (ordered[len(ordered) - lower - 1] - ordered[lower]))
        )

    def __str__(self) -> str:
        return f"{self.score:.2f} (μ = {self.mean:.2f} ± {self.half_width:.2f})"


def p_value(system: np.ndarray, baseline: np.ndarray, observed_difference: float) -> float:
    """The two-sided p-value of the module docstring from paired resampled scores."""
    differences = np.abs(system - baseline)
    if not differences.any():
        return 1.0
    exceeding = int(np.sum(differences - differences.mean() > abs(observed_difference)))
    return (exceeding + 1) / (len(differences) + 1)


@dataclass(frozen=True)
class Comparison:
    """One metric of S against B."""

    metric: str
    system: Estimate
    baseline: Estimate
    p_value: float

    @property
    def difference(self) -> float:
        return self.system.score - self.baseline.score

    def as_dict(self) -> dict[str, float]:
        return {
            "system": self.system.score,
            "system_mean": self.system.mean,
            "system_ci": self.system.half_width,
            "baseline": self.baseline.score,
            "baseline_mean": self.baseline.mean,
            "baseline_ci": self.baseline.half_width,
            "difference": self.difference,
            "p_value": self.p_value,
        }


def compare(
    metric: str,
    system_score: float,
    baseline_score: float,
    system_resampled: np.ndarray,
    baseline_resampled: np.ndarray,
) -> Comparison:
    """Estimates and p-value of one metric from its scores on the test set and on the resamples."""
    return Comparison(
        metric,
        Estimate.from_resamples(system_score, system_resampled),
        Estimate.from_resamples(baseline_score, baseline_resampled),
        p_value(system_resampled, baseline_resampled, system_score - baseline_score),
    )


@dataclass(frozen=True)
class PairedReport:
    """All compared metrics with the resampling settings and the two outputs' names."""

    comparisons: list[Comparison]
    n_samples: int
    seed: int
    system: str
    baseline: str

    def __getitem__(self, metric: str) -> Comparison:
        return next(c for c in self.comparisons if c.metric == metric)

    def lines(self) -> list[str]:
        width = max(len(c.metric) for c in self.comparisons)
        out = [
            f"paired bootstrap, {self.n_samples} resamples, seed {self.seed}: system {self.system} "
            f"against baseline {self.baseline}; μ ± 95% CI",
            f"{'metric':<{width}}  {'system':<28}{'baseline':<28}{'Δ':>7}  p",
        ]
        out += [
            f"{c.metric:<{width}}  {str(c.system):<28}{str(c.baseline):<28}{c.difference:+7.2f}  {c.p_value:.4f}"
            for c in self.comparisons
        ]
        return out

    def as_dict(self) -> dict[str, object]:
        return {
            "system": self.system,
            "baseline": self.baseline,
            "samples": self.n_samples,
            "seed": self.seed,
            "p_value": P_VALUE_DEFINITION,
            "ci": INTERVAL_DEFINITION,
            "metrics": {c.metric: c.as_dict() for c in self.comparisons},
        }


def positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive whole number, got {text}")
    return value


def add_paired_arguments(parser: argparse.ArgumentParser) -> None:
    """``--paired BASELINE_HYP``, ``--paired-samples R`` and ``--paired-seed S``, the same in every tool."""
    group = parser.add_argument_group("paired bootstrap against a baseline on the same test set")
    group.add_argument(
        "--paired",
        metavar="BASELINE_HYP",
        help="the baseline's output, in the same format as the hypotheses: report both "
        "systems' 95%% confidence intervals and the p-value of their difference",
    )
    group.add_argument(
        "--paired-samples",
        type=positive_int,
        default=DEFAULT_SAMPLES,
        help="bootstrap resamples R (default %(default)s)",
    )
    group.add_argument(
        "--paired-seed",
        type=positive_int,
        default=DEFAULT_SEED,
        help="seed of the resampling (default %(default)s, sacreBLEU's)",
    )


def check_same_length(
    system: Sequence[object], baseline: Sequence[object], system_name: str, baseline_name: str
) -> None:
    """A paired test needs one baseline output per system output."""
    if len(baseline) == 0:
        raise PairedInputError(
            f"the baseline {baseline_name} is empty: give the baseline's output on the same test set as {system_name}"
        )
    if len(system) != len(baseline):
        raise PairedInputError(
            f"{system_name} has {len(system)} lines but the baseline {baseline_name} has "
            f"{len(baseline)}: a paired test needs both systems' outputs for the same test items, in "
            "the same order"
        )
