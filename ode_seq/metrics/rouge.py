"""ROUGE-1/2/L/Lsum with stemming (``rouge-score``), matching Perl ROUGE-1.5.5 on summaries.

Each hypothesis/reference line is one summary. Before scoring, every summary is split into
sentences (``ode_seq.metrics.sentence_split``) and re-joined with newlines, the form under which
``rouge-score``'s ROUGE-Lsum (union-LCS over sentences) equals ROUGE-1.5.5's summary-level ROUGE-L;
ROUGE-1/2/L tokenise on non-alphanumerics and are unaffected by the newlines.

For each metric m and each of precision P, recall R and F1 the result holds
``mean`` = (1/N) Σ_i m(hyp_i, ref_i) (what papers report) and the bootstrap ``low``/``mid``/``high``
percentiles of the resampled mean from ``rouge_score.scoring.BootstrapAggregator``, all × 100.

With ``--paired BASELINE`` every (metric, measure) of H is compared with the baseline's by the paired
bootstrap of ``ode_seq.metrics.paired_bootstrap``: the corpus score of a resample is the mean of its
summaries' scores, as on the whole test set.

CLI: ``python -m ode_seq.metrics.rouge --hyp H --ref R [--paired BASELINE] --json out.json``. Text that
still holds subword units is refused (``ode_seq.metrics.subword_marks``) unless ``--allow-subword-marks``.
"""

import argparse
import os
import sys
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
from rouge_score import rouge_scorer, scoring

from ode_seq.metrics.paired_bootstrap import (
    DEFAULT_SAMPLES,
    DEFAULT_SEED,
    PairedReport,
    add_paired_arguments,
    check_same_length,
    compare,
    draw_counts,
    resample_indices,
)
from ode_seq.metrics.sentence_split import one_sentence_per_line
from ode_seq.metrics.subword_marks import add_allow_argument, read_words
from ode_seq.output_files import check_output_file, write_json_report

ROUGE_TYPES = ("rouge1", "rouge2", "rougeL", "rougeLsum")
DISPLAY_NAMES = {"rouge1": "ROUGE-1", "rouge2": "ROUGE-2", "rougeL": "ROUGE-L", "rougeLsum": "ROUGE-Lsum"}
MEASURES = ("fmeasure", "precision", "recall")
MEASURE_NAMES = {"fmeasure": "F1", "precision": "P", "recall": "R"}
SummaryScores = List[Dict[str, scoring.Score]]


def summary_scores(hypotheses: Sequence[str], references: Sequence[str], use_stemmer: bool = True) -> SummaryScores:
    """Each summary's ``{rouge_type: Score}``, after splitting both sides into sentences."""
    if len(hypotheses) != len(references):
        raise ValueError(
            f"{len(hypotheses)} hypotheses but {len(references)} references: "
            "each line must be the summary of the same article in both files"
        )
    if not hypotheses:
        raise ValueError("no summaries to score: the hypothesis and reference files are empty")
    scorer = rouge_scorer.RougeScorer(list(ROUGE_TYPES), use_stemmer=use_stemmer)
    return [
        scorer.score(one_sentence_per_line(reference), one_sentence_per_line(hypothesis))
        for hypothesis, reference in zip(hypotheses, references)
    ]


def measure_values(per_summary: SummaryScores, rouge_type: str, measure: str) -> np.ndarray:
    """One measure of every summary, in percent."""
    return 100.0 * np.array([getattr(scores[rouge_type], measure) for scores in per_summary])


def score_summaries(
    hypotheses: Sequence[str],
    references: Sequence[str],
    use_stemmer: bool = True,
    bootstrap_samples: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
    per_summary: Optional[SummaryScores] = None,
) -> Dict[str, Dict[str, Dict[str, float]]]:
    """``{rouge_type: {measure: {mean, low, mid, high}}}`` in percent; see module docstring.
    ``per_summary``, when given, holds the summaries' scores already computed by `summary_scores`."""
    if per_summary is None:
        per_summary = summary_scores(hypotheses, references, use_stemmer)
    aggregator = scoring.BootstrapAggregator(confidence_interval=confidence, n_samples=bootstrap_samples)
    for scores in per_summary:
        aggregator.add_scores(scores)
    random_state = np.random.get_state()
    np.random.seed(seed)
    try:
        intervals = aggregator.aggregate()
    finally:
        np.random.set_state(random_state)
    result: Dict[str, Dict[str, Dict[str, float]]] = {}
    for rouge_type in ROUGE_TYPES:
        result[rouge_type] = {}
        for measure in MEASURES:
            interval = intervals[rouge_type]
            result[rouge_type][measure] = {
                "mean": float(np.mean(measure_values(per_summary, rouge_type, measure))),
                "low": 100.0 * float(getattr(interval.low, measure)),
                "mid": 100.0 * float(getattr(interval.mid, measure)),
                "high": 100.0 * float(getattr(interval.high, measure)),
            }
    return result


def paired_test(
    system: SummaryScores,
    baseline: SummaryScores,
    n_samples: int = DEFAULT_SAMPLES,
    seed: int = DEFAULT_SEED,
    names: Tuple[str, str] = ("system", "baseline"),
) -> PairedReport:
    """Paired bootstrap of every ROUGE type and measure: a resample's score is the mean over its
    summaries, (1/N) Σ_i c_ri m_i with c_ri the number of draws of summary i."""
    check_same_length(system, baseline, *names)
    counts = draw_counts(resample_indices(len(system), n_samples, seed))
    comparisons = []
    for rouge_type in ROUGE_TYPES:
        for measure in MEASURES:
            ours, theirs = (measure_values(scores, rouge_type, measure) for scores in (system, baseline))
            comparisons.append(
                compare(
                    f"{DISPLAY_NAMES[rouge_type]} {MEASURE_NAMES[measure]}",
                    float(ours.mean()),
                    float(theirs.mean()),
                    counts @ ours / len(ours),
                    counts @ theirs / len(theirs),
                )
            )
    return PairedReport(comparisons, n_samples, seed, *names)


def format_table(scores: Dict[str, Dict[str, Dict[str, float]]], confidence: float) -> str:
    """Plain-text table: F1 with its confidence interval, then P and R (means, percent)."""
    level = f"{100 * confidence:g}% CI"
    lines = [f"{'metric':<11} {'F1':>6}  {level:>15}  {'P':>6}  {'R':>6}"]
    for rouge_type in ROUGE_TYPES:
        f1, precision, recall = (scores[rouge_type][m] for m in MEASURES)
        interval = f"[{f1['low']:.2f}, {f1['high']:.2f}]"
        lines.append(
            f"{DISPLAY_NAMES[rouge_type]:<11} {f1['mean']:6.2f}  {interval:>15}  "
            f"{precision['mean']:6.2f}  {recall['mean']:6.2f}"
        )
    return "\n".join(lines)


def parse_args(argv: Optional[Sequence[str]], prog: str = "python -m ode_seq.metrics.rouge") -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n")[0])
    parser.add_argument("--hyp", required=True, help="hypothesis summaries, one per line")
    parser.add_argument("--ref", required=True, help="reference summaries, one per line")
    parser.add_argument("--json", help="write the scores here as JSON")
    parser.add_argument("--no-stemmer", action="store_true", help="disable Porter stemming")
    parser.add_argument("--bootstrap-samples", type=int, default=1000)
    parser.add_argument("--confidence", type=float, default=0.95)
    parser.add_argument("--seed", type=int, default=0, help="seed of the bootstrap resampling")
    add_allow_argument(parser)
    add_paired_arguments(parser)
    args = parser.parse_args(argv)
    if args.bootstrap_samples < 1:
        parser.error(f"--bootstrap-samples must be at least 1, got {args.bootstrap_samples}")
    if not 0 < args.confidence < 1:
        parser.error(f"--confidence must be between 0 and 1 (e.g. 0.95), got {args.confidence}")
    return args


def main(argv: Optional[Sequence[str]] = None, prog: str = "python -m ode_seq.metrics.rouge") -> int:
    args = parse_args(argv, prog)
    try:
        if args.json:
            check_output_file(args.json, "--json")
        hypotheses, references = (read_words(path, args.allow_subword_marks) for path in (args.hyp, args.ref))
        per_summary = summary_scores(hypotheses, references, use_stemmer=not args.no_stemmer)
        scores = score_summaries(
            hypotheses,
            references,
            bootstrap_samples=args.bootstrap_samples,
            confidence=args.confidence,
            seed=args.seed,
            per_summary=per_summary,
        )
        if args.paired:
            baseline = read_words(args.paired, args.allow_subword_marks)
            check_same_length(hypotheses, baseline, args.hyp, args.paired)
            paired = paired_test(
                per_summary,
                summary_scores(baseline, references, not args.no_stemmer),
                args.paired_samples,
                args.paired_seed,
                (args.hyp, args.paired),
            )
    except (OSError, ValueError) as error:
        print(f"rouge: error: {error} (hyp={args.hyp}, ref={args.ref})", file=sys.stderr)
        return 2
    print(format_table(scores, args.confidence))
    if args.paired:
        print("\n" + "\n".join(paired.lines()))
    if args.json:
        payload = {
            "num_summaries": len(hypotheses),
            "unit": "percent",
            "use_stemmer": not args.no_stemmer,
            "sentence_split": "ode_seq.metrics.sentence_split, one sentence per line for rougeLsum",
            "bootstrap": {"samples": args.bootstrap_samples, "confidence": args.confidence, "seed": args.seed},
            "hyp": os.path.abspath(args.hyp),
            "ref": os.path.abspath(args.ref),
            "scores": scores,
        }
        if args.paired:
            payload["paired"] = paired.as_dict()
        return write_json_report(args.json, payload, "rouge: error")
    return 0


if __name__ == "__main__":
    sys.exit(main())
