"""What distillation buys: a Markdown table of the distilled student against the same architecture
trained from scratch, per seed and averaged over seeds.

    python examples/distillation/baseline_table.py --ref REF --lang es \
        --pair SEED DISTILLED/generate-test.txt SCRATCH/generate-test.txt [--pair …]

Each file is fairseq-generate output (H- lines, Moses tokens; every reference must have a
hypothesis). Per seed: sacreBLEU 13a of both with the bootstrap mean ± 95% interval, the
difference and its p-value from sacreBLEU's paired bootstrap (ode_seq.metrics.bleu.paired_test);
over seeds: the mean ± sd of each and of the difference, and the p-value of the seed-mean difference
(ode_seq.metrics.seed_mean). 1000 resamples, seed 12345.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Optional, Sequence

from ode_seq.metrics.bleu import moses_detokenise, paired_test, read_fairseq_hypotheses, read_text_lines
from ode_seq.metrics.paired_bootstrap import Comparison
from ode_seq.metrics.seed_mean import seed_mean_paired_test
from ode_seq.metrics.seeds import mean_sd


def row(seed: int, comparison: Comparison) -> str:
    return (
        f"| {seed} | {comparison.system} | {comparison.baseline} | {comparison.difference:+.2f} "
        f"| {comparison.p_value:.4f} |"
    )


def table(references: list[str], lang: str, pairs: Sequence[tuple[int, Path, Path]]) -> str:
    lines = [
        f"{len(references)} test sentences; every run translated each of them. sacreBLEU 13a, "
        "bootstrap mean ± 95% interval, 1000 resamples (seed 12345).",
        "",
        "| seed | distilled student | from scratch | Δ (distilled − scratch) | p (paired bootstrap) |",
        "|---|---|---|---|---|",
    ]
    per_seed, systems, baselines = [], [], []
    for seed, distilled_path, scratch_path in pairs:
        distilled, scratch = (read_fairseq_hypotheses(path, len(references)) for path in (distilled_path, scratch_path))
        report, _ = paired_test(
            distilled,
            scratch,
            references,
            lang,
            hypotheses_tokenised=True,
            tokenizers=("13a",),
            names=(str(distilled_path), str(scratch_path)),
        )
        per_seed.append(report.comparisons[0])
        lines.append(row(seed, per_seed[-1]))
        systems.append(moses_detokenise(distilled, lang))
        baselines.append(moses_detokenise(scratch, lang))
    mean = seed_mean_paired_test(systems, baselines, references)
    lines.append(
        f"| mean ± sd | {mean_sd([c.system.score for c in per_seed])} "
        f"| {mean_sd([c.baseline.score for c in per_seed])} "
        f"| {mean_sd([c.difference for c in per_seed])} | {mean.p_value:.4f} |"
    )
    return "\n".join(lines) + "\n"


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ref", type=Path, required=True, help="detokenised test references")
    parser.add_argument("--lang", default="es", help="target language (default: es)")
    parser.add_argument(
        "--pair",
        nargs=3,
        action="append",
        required=True,
        metavar=("SEED", "DISTILLED", "SCRATCH"),
        help="a seed and the fairseq-generate outputs of its two students",
    )
    args = parser.parse_args(argv)
    if not all(seed.isdigit() for seed, _, _ in args.pair):
        parser.error("--pair SEED DISTILLED SCRATCH: the seed must be a whole number")
    try:
        pairs = [(int(seed), Path(distilled), Path(scratch)) for seed, distilled, scratch in args.pair]
        sys.stdout.write(table(read_text_lines(args.ref, "reference"), args.lang, pairs))
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
