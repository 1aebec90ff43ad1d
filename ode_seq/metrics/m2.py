"""MaxMatch (M2) scorer for grammatical error correction (Dahlmeier & Ng 2012), in Python 3.

For each sentence the system's edits are read off the path through the edit lattice between
source and hypothesis that matches the most gold edits (:mod:`ode_seq.metrics.m2_lattice`).
Counts are summed over the corpus: ``C`` correct (system edits equal to a gold edit, see
:func:`match_edits`), ``E`` proposed, ``G`` gold edits, and

    P = C / E,   R = C / G,   F_β = (1 + β²) P R / (β² P + R)

with P = 1 when E = 0, R = 1 when G = 0 and F_β = 0 when β² P + R = 0. With several annotators,
each sentence is scored against the annotator whose edits maximise F_β of the running totals;
ties go to more correct edits, then to a smaller ``E + β² G``, then to the lowest annotator id.
A sentence without annotations counts as annotator 0 with no edits. This reproduces the
official scorer (M2Scorer 3.2) on its examples and on random comparisons.

With ``--paired BASELINE`` the hypotheses' P, R and F_β are compared with the baseline's by the
paired bootstrap of :mod:`ode_seq.metrics.gec_bootstrap` (each resample scored as above, annotator
choices included).

    python -m ode_seq.metrics.m2 HYPOTHESES GOLD.m2 [--beta 0.5] [--max-unchanged-words 2]
        [--ignore-whitespace-casing] [--annotator ID] [-v]
        [--paired BASELINE [--paired-samples 1000] [--paired-seed 12345]] [--allow-subword-marks]

Hypotheses and S lines that still hold subword units are refused (:mod:`ode_seq.metrics.subword_marks`)
unless ``--allow-subword-marks``.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, TextIO

import numpy as np

from . import gec_bootstrap
from .m2_format import GoldEdit, M2FormatError, M2Sentence, check_annotator, read_m2
from .m2_lattice import EditLattice, SystemEdit
from .paired_bootstrap import PairedReport
from .subword_marks import add_allow_argument, check_m2_words, read_words


@dataclass(frozen=True)
class EditCounts:
    """Correct, proposed and gold edit counts, and the precision/recall/F_β they give."""

    correct: int = 0
    proposed: int = 0
    gold: int = 0

    def __add__(self, other: "EditCounts") -> "EditCounts":
        return EditCounts(self.correct + other.correct, self.proposed + other.proposed, self.gold + other.gold)

    @property
    def precision(self) -> float:
        return self.correct / self.proposed if self.proposed else 1.0

    @property
    def recall(self) -> float:
        return self.correct / self.gold if self.gold else 1.0

    def f_score(self, beta: float = 0.5) -> float:
        """F_β from precision and recall (0 when both are 0)."""
        p, r = self.precision, self.recall
        denominator = beta * beta * p + r
        return (1 + beta * beta) * p * r / denominator if denominator else 0.0

    def f_score_of_counts(self, beta: float) -> float:
        """F_β written on the counts, ``(1+β²)C / (β²G + E)``: the criterion for choosing an annotator
        (1 when that denominator and C are 0, 0 when only the denominator is)."""
        denominator = beta * beta * self.gold + self.proposed
        if denominator:
            return (1 + beta * beta) * self.correct / denominator
        return 1.0 if self.correct == 0 else 0.0


@dataclass(frozen=True)
class SentenceResult:
    """One annotator's view of one sentence."""

    annotator: int
    system_edits: List[SystemEdit]
    correct_edits: List[SystemEdit]
    gold_edits: List[GoldEdit]

    @property
    def counts(self) -> EditCounts:
        return EditCounts(len(self.correct_edits), len(self.system_edits), len(self.gold_edits))


def match_edits(system: Sequence[SystemEdit], gold: Sequence[GoldEdit]) -> List[SystemEdit]:
    """Correct system edits, in source order. Each system edit is compared with the gold edits from
    a pointer on (file order) and is listed once per gold edit it equals; the pointer then moves past
    the last of them. So duplicate gold edits count twice, as in the official scorer."""
    correct: List[SystemEdit] = []
    next_gold = 0
    for edit in system:
        matched = [
            index for index in range(next_gold, len(gold)) if gold[index].matches(edit.start, edit.end, edit.correction)
        ]
        correct.extend(edit for _ in matched)
        if matched:
            next_gold = matched[-1] + 1
    return correct


def differs_only_in_whitespace_or_case(edit: SystemEdit) -> bool:
    """True for edits such as ``New York -> newyork``."""
    return edit.original.replace(" ", "").lower() == edit.correction.replace(" ", "").lower()


@dataclass
class M2Scorer:
    """Scores hypotheses against M2 sentences; see the module docstring for the definitions."""

    beta: float = 0.5
    max_unchanged_words: int = 2
    ignore_whitespace_casing: bool = False
    annotator: Optional[int] = None

    def annotations(self, sentence: M2Sentence) -> Dict[int, List[GoldEdit]]:
        """The annotators a sentence is scored against, with their edits, by ascending id."""
        if self.annotator is not None:
            return {self.annotator: sentence.edits_of(self.annotator)}
        return dict(sorted(sentence.annotations.items())) or {0: []}

    def sentence_results(self, hypothesis: str, sentence: M2Sentence) -> List[SentenceResult]:
        """Per annotator: the system edits on the best-matching lattice path and which are correct."""
        lattice = EditLattice(sentence.source, hypothesis.split(), self.max_unchanged_words)
        results = []
        for annotator, gold in self.annotations(sentence).items():
            system = lattice.best_edits(gold)
            if self.ignore_whitespace_casing:
                system = [edit for edit in system if not differs_only_in_whitespace_or_case(edit)]
            results.append(SentenceResult(annotator, system, match_edits(system, gold), list(gold)))
        return results

    def choose(self, results: Sequence[SentenceResult], totals: EditCounts) -> SentenceResult:
        """The annotator maximising F_β of ``totals`` plus its counts (ties: see module docstring)."""
        squared_beta = self.beta * self.beta

        def key(result: SentenceResult):
            running = totals + result.counts
            return (
                running.f_score_of_counts(self.beta),
                running.correct,
                -(running.proposed + squared_beta * running.gold),
            )

        return max(results, key=key)  # the first of equal keys: the lowest annotator id

    def score(
        self, hypotheses: Sequence[str], sentences: Sequence[M2Sentence], log: Optional[TextIO] = None
    ) -> EditCounts:
        """Corpus counts; with ``log``, every sentence's edits and chosen annotator are written there."""
        if len(hypotheses) != len(sentences):
            raise ValueError(f"{len(hypotheses)} hypotheses for {len(sentences)} M2 sentences")
        totals = EditCounts()
        for number, (hypothesis, sentence) in enumerate(zip(hypotheses, sentences), start=1):
            results = self.sentence_results(hypothesis, sentence)
            chosen = self.choose(results, totals)
            if log is not None:
                _log_sentence(log, number, hypothesis, sentence, results, chosen, totals, self.beta)
            totals = totals + chosen.counts
        return totals

    def candidates(self, hypotheses: Sequence[str], sentences: Sequence[M2Sentence]) -> gec_bootstrap.Candidates:
        """Per sentence, each annotator's (correct, proposed, gold), in the order `choose` sees them."""
        return gec_bootstrap.Candidates.from_lists(
            [
                [(r.counts.correct, r.counts.proposed, r.counts.gold) for r in self.sentence_results(h, s)]
                for h, s in zip(hypotheses, sentences)
            ]
        )

    def choice_key(self, running: np.ndarray, _candidate: np.ndarray) -> tuple[np.ndarray, ...]:
        """`choose`'s key, vectorised over running totals (C, E, G) of shape (R, 3)."""
        squared_beta = self.beta * self.beta
        correct, proposed, gold = (running[:, i].astype(np.float64) for i in range(3))
        denominator = squared_beta * gold + proposed
        f_score = np.where(
            denominator == 0,
            np.where(correct == 0, 1.0, 0.0),
            (1 + squared_beta) * correct / np.where(denominator == 0, 1, denominator),
        )
        return f_score, correct, -(proposed + squared_beta * gold)

    def paired_test(
        self,
        hypotheses: Sequence[str],
        baseline: Sequence[str],
        sentences: Sequence[M2Sentence],
        n_samples: int,
        seed: int,
        names: tuple[str, str],
    ) -> PairedReport:
        """Paired bootstrap of P, R and F_β (percent) of hypotheses against a baseline's."""
        return gec_bootstrap.paired_test(
            self.candidates(hypotheses, sentences),
            self.candidates(baseline, sentences),
            self.choice_key,
            self.beta,
            "M2",
            lambda totals: tuple(totals.T),
            n_samples,
            seed,
            names,
        )


def _log_sentence(
    log: TextIO,
    number: int,
    hypothesis: str,
    sentence: M2Sentence,
    results: Sequence[SentenceResult],
    chosen: SentenceResult,
    totals: EditCounts,
    beta: float,
) -> None:
    log.write(f"SOURCE        : {' '.join(sentence.source)}\nHYPOTHESIS    : {hypothesis}\n")
    for result in results:
        running = totals + result.counts
        gold = [
            _describe(g.start, g.end, " ".join(sentence.source[g.start : g.end]), "||".join(g.corrections))
            for g in result.gold_edits
        ]
        log.write(
            f">> annotator {result.annotator}\n"
            f"EDIT SEQ      : {[_describe(e.start, e.end, e.original, e.correction) for e in result.system_edits]}\n"
            f"GOLD EDITS    : {gold}\n"
            f"CORRECT EDITS : {[_describe(e.start, e.end, e.original, e.correction) for e in result.correct_edits]}\n"
            f"# correct / proposed / gold (running): {running.correct} / {running.proposed} / {running.gold}"
            f"  P {running.precision:.4f}  R {running.recall:.4f}  F_{beta} {running.f_score(beta):.4f}\n"
        )
    log.write(f">> chosen annotator for sentence {number}: {chosen.annotator}\n{'-' * 60}\n")


def _describe(start: int, end: int, original: str, correction: str) -> str:
    return f"{start}:{end} {original!r}->{correction!r}"


def read_hypotheses(path: str, subword_marks_allowed: bool = False) -> List[str]:
    """One hypothesis per line (read by `ode_seq.text_files`), without surrounding whitespace, in
    words unless ``subword_marks_allowed`` (`ode_seq.metrics.subword_marks`)."""
    return [line.strip() for line in read_words(path, subword_marks_allowed)]


def read_gold(path: str, subword_marks_allowed: bool = False) -> List[M2Sentence]:
    """The sentences of the M2 file ``path``, in words unless ``subword_marks_allowed``."""
    sentences = read_m2(path)
    check_m2_words([" ".join(sentence.source) for sentence in sentences], path, subword_marks_allowed)
    return sentences


def read_hypotheses_for(
    path: str, sentences: Sequence[M2Sentence], gold_path: str, subword_marks_allowed: bool = False
) -> List[str]:
    """One hypothesis line per M2 sentence; ``ValueError`` names the files otherwise."""
    hypotheses = read_hypotheses(path, subword_marks_allowed)
    if len(hypotheses) != len(sentences):
        raise ValueError(
            f"{path} has {len(hypotheses)} hypothesis lines but {gold_path} has "
            f"{len(sentences)} sentences: give one hypothesis line per M2 sentence"
        )
    return hypotheses


def score_files(
    hypothesis_path: str,
    gold_path: str,
    scorer: M2Scorer,
    log: Optional[TextIO] = None,
    subword_marks_allowed: bool = False,
) -> EditCounts:
    """Read both files, check that they fit together, and score; ``ValueError`` names the problem."""
    sentences = read_gold(gold_path, subword_marks_allowed)
    if not sentences:
        raise ValueError(
            f"{gold_path} holds no M2 sentences (each starts with an 'S' line): "
            "there is nothing to score; check that the gold file is the right one"
        )
    hypotheses = read_hypotheses_for(hypothesis_path, sentences, gold_path, subword_marks_allowed)
    if scorer.annotator is not None:
        check_annotator(sentences, scorer.annotator, gold_path)
    return scorer.score(hypotheses, sentences, log)


def paired_files(
    hypothesis_path: str,
    baseline_path: str,
    gold_path: str,
    scorer: M2Scorer,
    n_samples: int,
    seed: int,
    subword_marks_allowed: bool = False,
) -> PairedReport:
    """The paired bootstrap of two hypothesis files on one M2 file."""
    sentences = read_gold(gold_path, subword_marks_allowed)
    hypotheses, baseline = (
        read_hypotheses_for(path, sentences, gold_path, subword_marks_allowed)
        for path in (hypothesis_path, baseline_path)
    )
    return scorer.paired_test(hypotheses, baseline, sentences, n_samples, seed, (hypothesis_path, baseline_path))


def parse_args(argv: Optional[Sequence[str]] = None, prog: str = "python -m ode_seq.metrics.m2") -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n\n")[0])
    parser.add_argument("hypotheses", help="system output, one tokenised sentence per line")
    parser.add_argument("gold", help="M2 file with the source sentences and gold edits")
    parser.add_argument("--beta", type=float, default=0.5, help="β of F_β (default 0.5)")
    parser.add_argument(
        "--max-unchanged-words",
        "--max_unchanged_words",
        type=int,
        default=2,
        help="most unchanged tokens inside one merged system edit (default 2)",
    )
    parser.add_argument(
        "--ignore-whitespace-casing",
        "--ignore_whitespace_casing",
        action="store_true",
        help="drop system edits that only change whitespace or letter case",
    )
    parser.add_argument(
        "--annotator",
        type=int,
        default=None,
        help="score against this annotator only (default: best annotator per sentence)",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="print every sentence's edits")
    add_allow_argument(parser)
    return gec_bootstrap.parse_scorer_args(parser, argv)


def main(argv: Optional[Sequence[str]] = None, prog: str = "python -m ode_seq.metrics.m2") -> int:
    args = parse_args(argv, prog)
    scorer = M2Scorer(args.beta, args.max_unchanged_words, args.ignore_whitespace_casing, args.annotator)
    try:
        log = sys.stdout if args.verbose else None
        counts = score_files(args.hypotheses, args.gold, scorer, log, args.allow_subword_marks)
        if args.paired:
            paired = paired_files(
                args.hypotheses,
                args.paired,
                args.gold,
                scorer,
                args.paired_samples,
                args.paired_seed,
                args.allow_subword_marks,
            )
    except (M2FormatError, ValueError, OSError) as error:
        print(f"m2: error: {error}", file=sys.stderr)
        return 1
    if args.verbose:
        print(f"CORRECT EDITS  : {counts.correct}\nPROPOSED EDITS : {counts.proposed}\nGOLD EDITS     : {counts.gold}")
    print(f"Precision   : {counts.precision:.4f}")
    print(f"Recall      : {counts.recall:.4f}")
    print(f"F_{args.beta:.1f}       : {counts.f_score(args.beta):.4f}")
    if args.paired:
        print("\n" + "\n".join(paired.lines()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
