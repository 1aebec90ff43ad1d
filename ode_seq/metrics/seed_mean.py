"""Paired bootstrap of a BLEU difference averaged over training seeds.

With systems S_1..S_K and baselines B_1..B_K (one pair per seed) on the same N test sentences, the
statistic is the seed mean  S̄ = (1/K) Σ_k BLEU(S_k)  against  B̄ = (1/K) Σ_k BLEU(B_k).  Each
resample draws N sentence indices once and rescores every system and baseline on them (sacreBLEU's
BLEU from its per-sentence sufficient statistics, as its own paired test does), so S̄_r and B̄_r
are paired across seeds as well as systems; interval and p-value are those of
:mod:`ode_seq.metrics.paired_bootstrap`. With K = 1 this is sacreBLEU's paired bootstrap.
The resampling covers the choice of test sentences only; the spread over seeds is the sample
standard deviation to report beside it.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
from sacrebleu.metrics import BLEU

from .paired_bootstrap import (
    DEFAULT_SAMPLES,
    DEFAULT_SEED,
    Comparison,
    PairedInputError,
    compare,
    draw_counts,
    resample_indices,
)


def bleu_on_resamples(
    metric: BLEU, hypotheses: Sequence[str], references: Sequence[str], counts: np.ndarray
) -> tuple[float, np.ndarray]:
    """BLEU on the whole test set and on each resample (rows of draw counts)."""
    statistics = np.array(metric._extract_corpus_statistics(list(hypotheses), [list(references)]), dtype=np.float64)
    resampled = counts @ statistics
    return (
        metric._compute_score_from_stats(statistics.sum(0).tolist()).score,
        np.array([metric._compute_score_from_stats(row.tolist()).score for row in resampled]),
    )


def seed_mean_paired_test(
    systems: Sequence[Sequence[str]],
    baselines: Sequence[Sequence[str]],
    references: Sequence[str],
    tokenize: str = "13a",
    n_samples: int = DEFAULT_SAMPLES,
    seed: int = DEFAULT_SEED,
) -> Comparison:
    """Seed-mean BLEU of ``systems`` against ``baselines`` (detokenised, pair k = seed k)."""
    if len(systems) != len(baselines) or not systems:
        raise PairedInputError(f"{len(systems)} systems for {len(baselines)} baselines: give one of each per seed")
    for output in (*systems, *baselines):
        if len(output) != len(references):
            raise PairedInputError(f"an output of {len(output)} lines for {len(references)} references")
    counts = draw_counts(resample_indices(len(references), n_samples, seed))
    metric = BLEU(tokenize=tokenize)
    system_scores, baseline_scores = (
        [bleu_on_resamples(metric, output, references, counts) for output in side] for side in (systems, baselines)
    )
    return compare(
        f"sacreBLEU {tokenize}, mean of {len(systems)} seeds",
        float(np.mean([score for score, _ in system_scores])),
        float(np.mean([score for score, _ in baseline_scores])),
        np.mean([resampled for _, resampled in system_scores], axis=0),
        np.mean([resampled for _, resampled in baseline_scores], axis=0),
    )
