"""Paired bootstrap for GEC scorers that choose an annotator per sentence (M2 and ERRANT).

Both scorers sum edit counts over the corpus, but for each sentence, in corpus order, they keep the
candidate (annotator, or hypothesis × reference annotator) whose counts maximise a key of the running
totals: which candidate wins depends on the sentences before it. So each resample is scored as the
scorer would score that resampled corpus: the sentences' per-candidate counts are computed once, and
the choice is replayed over each resample's sequence of sentences (vectorised over the resamples).
From a resample's totals of correct (C), proposed (E) and gold (G) edits,

    P = C / E,  R = C / G,  F_β = (1 + β²) P R / (β² P + R)

(P = 1 when E = 0, R = 1 when G = 0, F_β = 0 when P = R = 0), in percent; the test, intervals and
p-values are those of :mod:`ode_seq.metrics.paired_bootstrap`.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Callable, Optional, Sequence

import numpy as np

from .paired_bootstrap import (
    DEFAULT_SAMPLES,
    DEFAULT_SEED,
    PairedInputError,
    PairedReport,
    add_paired_arguments,
    check_same_length,
    compare,
    resample_indices,
)


def parse_scorer_args(parser: argparse.ArgumentParser, argv: Optional[Sequence[str]]) -> argparse.Namespace:
    """A GEC scorer's command line: ``parser``'s options (among them ``--beta``, which must be a
    finite β ≥ 0) and those of the paired test."""
    add_paired_arguments(parser)
    args = parser.parse_args(argv)
    if not 0 <= args.beta < float("inf"):
        parser.error(f"--beta must be a finite number >= 0, got {args.beta}")
    return args


Key = Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, ...]]
"""(running totals with a candidate's counts, the candidate's counts), both (R, 3) → key arrays (R,)."""


@dataclass(frozen=True)
class Candidates:
    """Per sentence, the counts (3 numbers) of each candidate in the scorer's order, padded."""

    counts: np.ndarray  # (N, A, 3)
    valid: np.ndarray  # (N, A); every sentence has candidate 0

    @classmethod
    def from_lists(cls, per_sentence: Sequence[Sequence[tuple[int, int, int]]]) -> "Candidates":
        if any(not candidates for candidates in per_sentence):
            raise PairedInputError("a sentence without any annotator to score against")
        width = max((len(candidates) for candidates in per_sentence), default=1)
        counts = np.zeros((len(per_sentence), width, 3), dtype=np.int64)
        valid = np.zeros((len(per_sentence), width), dtype=bool)
        for sentence, candidates in enumerate(per_sentence):
            counts[sentence, : len(candidates)] = candidates
            valid[sentence, : len(candidates)] = True
        return cls(counts, valid)

    def __len__(self) -> int:
        return len(self.counts)


def lexicographically_greater(left: tuple[np.ndarray, ...], right: tuple[np.ndarray, ...]) -> np.ndarray:
    """Element-wise: is the tuple (left[0][i], left[1][i], …) greater than right's?"""
    greater = np.zeros(left[0].shape, dtype=bool)
    equal = np.ones(left[0].shape, dtype=bool)
    for a, b in zip(left, right):
        greater |= equal & (a > b)
        equal &= a == b
    return greater


def resampled_totals(candidates: Candidates, indices: np.ndarray, key: Key) -> np.ndarray:
    """(R, 3) corpus totals of each row of sentence indices: sentence by sentence, the candidate with
    the greatest key joins the totals (the first one of equal keys)."""
    totals = np.zeros((len(indices), 3), dtype=np.int64)
    for sentences in indices.T:
        counts, valid = candidates.counts[sentences], candidates.valid[sentences]
        best = counts[:, 0]
        best_key = key(totals + best, best)
        for column in range(1, counts.shape[1]):
            candidate = counts[:, column]
            candidate_key = key(totals + candidate, candidate)
            better = valid[:, column] & lexicographically_greater(candidate_key, best_key)
            best = np.where(better[:, None], candidate, best)
            best_key = tuple(np.where(better, c, b) for c, b in zip(candidate_key, best_key))
        totals += best
    return totals


def ratio_or_one(numerator: np.ndarray, denominator: np.ndarray) -> np.ndarray:
    """numerator / denominator, and 1 where the denominator is 0."""
    safe = np.where(denominator == 0, 1, denominator)
    return np.where(denominator == 0, 1.0, numerator / safe)


def precision_recall_f(
    correct: np.ndarray, proposed: np.ndarray, gold: np.ndarray, beta: float
) -> dict[str, np.ndarray]:
    """P, R and F_β of the module docstring, in percent, keyed "P", "R", "F{β}"."""
    precision = ratio_or_one(correct.astype(np.float64), proposed)
    recall = ratio_or_one(correct.astype(np.float64), gold)
    denominator = beta * beta * precision + recall
    f_score = np.where(
        denominator == 0, 0.0, (1 + beta * beta) * precision * recall / np.where(denominator == 0, 1, denominator)
    )
    return {"P": 100 * precision, "R": 100 * recall, f"F{beta:g}": 100 * f_score}


def paired_test(
    system: Candidates,
    baseline: Candidates,
    key: Key,
    beta: float,
    label: str,
    to_correct_proposed_gold: Callable[[np.ndarray], tuple[np.ndarray, ...]],
    n_samples: int = DEFAULT_SAMPLES,
    seed: int = DEFAULT_SEED,
    names: tuple[str, str] = ("system", "baseline"),
) -> PairedReport:
    """P, R and F_β of ``system`` against ``baseline``; the whole-corpus scores replay the choice in
    corpus order, which is the scorer's own computation."""
    check_same_length(system, baseline, *names)
    indices = resample_indices(len(system), n_samples, seed)
    corpus = np.arange(len(system))[None]

    def scores(candidates: Candidates, rows: np.ndarray) -> dict[str, np.ndarray]:
        totals = resampled_totals(candidates, rows, key)
        return precision_recall_f(*to_correct_proposed_gold(totals), beta)

    system_corpus, baseline_corpus = scores(system, corpus), scores(baseline, corpus)
    system_resampled, baseline_resampled = scores(system, indices), scores(baseline, indices)
    comparisons = [
        compare(
            f"{label} {measure}",
            float(system_corpus[measure][0]),
            float(baseline_corpus[measure][0]),
            system_resampled[measure],
            baseline_resampled[measure],
        )
        for measure in system_corpus
    ]
    return PairedReport(comparisons, n_samples, seed, *names)
