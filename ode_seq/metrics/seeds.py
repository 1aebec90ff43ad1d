"""Statistics of a configuration's runs over training seeds, as the study tables report them.

A study trains each configuration with seeds 1..K and compares runs of the same seed (the same
initialisation draws and data order): the spread is the sample standard deviation over seeds,
s = √(Σ_k (x_k − x̄)² / (K − 1)), and a comparison pairs run k of one configuration with run k of
another. The paired test over test items is :mod:`.paired_bootstrap` (one seed) and
:mod:`.seed_mean` (the seed mean).
"""

from __future__ import annotations

import statistics
from typing import Iterable, List, Optional, Protocol, Sequence, Tuple, TypeVar


class SeededRun(Protocol):
    seed: int


Run = TypeVar("Run", bound=SeededRun)
Baseline = TypeVar("Baseline", bound=SeededRun)


def mean_sd(values: Sequence[float], digits: int = 2) -> str:
    """ "x̄ ± s" over the seeds' ``values``; one value is marked "(1 seed)"; none is empty."""
    if not values:
        return ""
    if len(values) == 1:
        return f"{values[0]:.{digits}f} (1 seed)"
    return f"{statistics.mean(values):.{digits}f} ± {statistics.stdev(values):.{digits}f}"


def mean_or_none(values: Iterable[float]) -> Optional[float]:
    """The mean of ``values`` (e.g. the seeds that reached an epoch), None when there are none."""
    values = list(values)
    return statistics.mean(values) if values else None


def pairs_by_seed(runs: Iterable[Run], baselines: Iterable[Baseline]) -> List[Tuple[Run, Baseline]]:
    """Each of ``runs`` with the baseline run of its seed, in the order of ``runs``; a run whose seed
    the baselines lack is left out."""
    by_seed = {baseline.seed: baseline for baseline in baselines}
    return [(run, by_seed[run.seed]) for run in runs if run.seed in by_seed]
