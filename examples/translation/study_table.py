"""Summarise the runs of quality_study.sh as a Markdown table: per configuration, parameters,
encoder layer evaluations (layers × stages of the encoder's method, plus one for a corrector, read from the logged model
configuration), sacreBLEU (13a) mean ± sample standard deviation over seeds, the p-value of each
seed's difference from the residual 6-6 model of the same seed (sacreBLEU's paired bootstrap,
1000 resamples, seed 12345: ode_seq.metrics.bleu.paired_test), each seed's score, and the final
validation NLL (bits per target token, before averaging); each configuration's compute: training and
inference FLOPs per target token (--flops-dir DIR: DIR/CONFIG.txt, `ode-seq flops` of its first
batch) and the training FLOPs of a run (per token × the target tokens it trained on, from its log).
A configuration trained to another's compute (PAIRED_WITH) is also compared with that one, seed by
seed. --compute-figure draws validation NLL and BLEU against training FLOPs with the Pareto front.

A run is RUNS_DIR/CONFIG/seedS with fairseq-train's train.log and eval-test/scores.json and
generate-test.txt; --ref holds the test references.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence

from ode_seq.analysis.flops import FlopCount, pareto_front, read_flop_counts, training_tokens
from ode_seq.metrics.bleu import paired_test, read_fairseq_hypotheses, read_text_lines
from ode_seq.metrics.seeds import mean_or_none, mean_sd, pairs_by_seed
from ode_seq.solvers.tableaus import get_tableau
from ode_seq.studies import PARAMS, TRAINING_SECONDS, TRANSLATION

LAST_UPDATE = re.compile(r"num_updates[ =](\d+)")
ENCODER_LAYERS = re.compile(r"\bencoder_layers=(\d+)")
ENCODER_METHOD = re.compile(r"\bencoder_ode_method='(\w+)'")
ENCODER_CORRECTOR = re.compile(r"\bencoder_ode_corrector='(\w+)'")
VALID_NLL = re.compile(
    r"valid on 'valid' subset \| loss [\d.]+ \| nll_loss ([\d.]+) \|.*?"
    r"\| num_updates (\d+)"
)
CURVE_SPACING = 200
BASELINE = TRANSLATION.baseline


@dataclass
class Run:
    directory: Path
    seed: int
    parameters: int
    encoder_layer_evaluations: int
    updates: int
    training_tokens: float  # target tokens trained on
    training_minutes: float
    valid_nll: Dict[int, float]  # update → validation NLL; fairseq validates at every checkpoint

    @property
    def final_valid_nll(self) -> float:
        return self.valid_nll[max(self.valid_nll)]

    bleu_13a: float
    bleu_tokenised: float
    signature: str


def read_run(run_dir: Path) -> Optional[Run]:
    """The finished run in ``run_dir``, or None when it has no scores yet."""
    scores_file = run_dir / "eval-test" / "scores.json"
    if not scores_file.is_file():
        return None
    log = (run_dir / "train.log").read_text(encoding="utf-8")
    params = PARAMS.search(log)
    seconds = TRAINING_SECONDS.findall(log)
    updates = LAST_UPDATE.findall(log)
    layers, method = ENCODER_LAYERS.search(log), ENCODER_METHOD.search(log)
    valid_nll, tokens = VALID_NLL.findall(log), training_tokens(log)
    if params is None or not seconds or not updates or layers is None or method is None or not valid_nll or not tokens:
        raise ValueError(
            f"{run_dir}/train.log lacks the model configuration, the parameter count, the "
            "final update, the validation loss, the epoch summary or the 'done training' line: the run did not "
            "finish; delete its eval-test and rerun"
        )
    scores = json.loads(scores_file.read_text(encoding="utf-8"))
    return Run(
        directory=run_dir,
        seed=int(run_dir.name.removeprefix("seed")),
        parameters=int(params.group(1).replace(",", "")),
        encoder_layer_evaluations=int(layers.group(1)) * evaluations_per_block(method.group(1), log),
        updates=int(updates[-1]),
        training_tokens=tokens[-1],
        training_minutes=float(seconds[-1]) / 60,
        valid_nll={int(update): float(nll) for nll, update in valid_nll},
        bleu_13a=scores["sacrebleu"]["13a"]["score"],
        bleu_tokenised=scores["tokenised_compound_split"]["score"],
        signature=scores["sacrebleu"]["13a"]["signature"],
    )


def evaluations_per_block(method: str, log: str) -> int:
    """Layer evaluations of one encoder block: the method's stages, plus one for a corrector."""
    corrector = ENCODER_CORRECTOR.search(log)
    return get_tableau(method).stages + int(corrector is not None and corrector.group(1) != "none")


def finished_runs(runs_dir: Path, config: str) -> List[Run]:
    runs = (read_run(run_dir) for run_dir in runs_dir.glob(f"{config}/seed*"))
    return sorted((run for run in runs if run), key=lambda run: run.seed)


def paired_p_values(
    by_config: Dict[str, List[Run]], baseline: str, references: List[str], lang: str
) -> Dict[str, Dict[int, float]]:
    """Per configuration and seed, the paired-bootstrap p-value of its sacreBLEU 13a against the
    baseline's run of the same seed (every test sentence must have a hypothesis)."""

    def hypotheses(run: Run) -> List[str]:
        return read_fairseq_hypotheses(run.directory / "eval-test" / "generate-test.txt", len(references))

    p_values: Dict[str, Dict[int, float]] = {}
    for config, runs in by_config.items():
        if config == baseline:
            continue
        for run, base in pairs_by_seed(runs, by_config.get(baseline, [])):
            report, _ = paired_test(
                hypotheses(run), hypotheses(base), references, lang, hypotheses_tokenised=True, tokenizers=("13a",)
            )
            p_values.setdefault(config, {})[run.seed] = report.comparisons[0].p_value
    return p_values


def p_value_cell(config: str, p_values: Dict[str, Dict[int, float]]) -> str:
    if config == BASELINE:
        return "(baseline)"
    return ", ".join(f"{p:.3f} (seed {seed})" for seed, p in sorted(p_values.get(config, {}).items()))


def paired_differences(by_config: Dict[str, List[Run]], baseline: str) -> List[str]:
    """Per configuration, BLEU minus the baseline's BLEU of the same seed (same data order)."""
    lines = []
    for config, runs in by_config.items():
        deltas = [run.bleu_13a - base.bleu_13a for run, base in pairs_by_seed(runs, by_config.get(baseline, []))]
        if config != baseline and deltas:
            lines.append(
                f"| {TRANSLATION.label(config)} | {mean_sd(deltas)} | " + ", ".join(f"{d:+.2f}" for d in deltas) + " |"
            )
    if not lines:
        return []
    return [
        "",
        f"sacreBLEU 13a minus {TRANSLATION.label(baseline)} of the same seed:",
        "",
        "| configuration | Δ BLEU, mean ± sd | per seed |",
        "|---|---|---|",
        *lines,
    ]


def learning_curves(by_config: Dict[str, List[Run]]) -> List[str]:
    """Validation NLL every CURVE_SPACING updates, mean over the seeds that reached it."""
    updates = sorted(
        {u for runs in by_config.values() for run in runs for u in run.valid_nll if u % CURVE_SPACING == 0}
    )
    if not updates:
        return []
    lines = [
        "",
        "Validation NLL (bits/token) along training, mean over seeds:",
        "",
        "| configuration | " + " | ".join(f"{u} updates" for u in updates) + " |",
        "|---|" + "---|" * len(updates),
    ]
    for config, runs in by_config.items():
        if runs:
            cells = [mean_or_none(run.valid_nll[u] for run in runs if u in run.valid_nll) for u in updates]
            lines.append(
                f"| {TRANSLATION.label(config)} | " + " | ".join("" if c is None else f"{c:.3f}" for c in cells) + " |"
            )
    return lines


def run_flops(run: Run, count: FlopCount) -> float:
    """The training FLOPs of ``run``: per target token × the target tokens it trained on."""
    return run.training_tokens * count.training_per_token


def compared_with_pairs(by_config: Dict[str, List[Run]], references: List[str], lang: str) -> List[str]:
    """Each configuration trained to another's compute against that one, seed by seed."""
    lines = []
    for config, pair in TRANSLATION.pairs("compute_of").items():
        if by_config.get(config) and by_config.get(pair):
            both = {pair: by_config[pair], config: by_config[config]}
            p_values = paired_p_values(both, pair, references, lang)[config]
            lines += paired_differences(both, pair)
            lines.append("")
            lines.append(
                f"Paired bootstrap p of {TRANSLATION.label(config)} against {TRANSLATION.label(pair)}: "
                + ", ".join(f"{p:.3f} (seed {seed})" for seed, p in sorted(p_values.items()))
            )
    return lines


def table(
    runs_dir: Path,
    configs: Sequence[str],
    recipe: str,
    references: List[str],
    flops: Dict[str, FlopCount],
    lang: str = "es",
) -> str:
    lines = [
        f"Recipe: {recipe}",
        "",
        "| configuration | parameters | encoder layer evaluations | training FLOPs per target token "
        "| inference FLOPs per target token | seeds | updates | training FLOPs per run | sacreBLEU 13a, mean ± sd "
        f"| paired bootstrap p against {TRANSLATION.label(BASELINE)}, per seed "
        "| per seed | tokenised BLEU, mean ± sd | valid NLL (bits/token), mean ± sd "
        "| training minutes per run (1 thread) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    by_config = {config: finished_runs(runs_dir, config) for config in configs}
    p_values = paired_p_values(by_config, BASELINE, references, lang)
    for config, runs in by_config.items():
        count = flops[config]
        compute = f"{count.training_per_token / 1e6:.2f} M | {count.inference_per_token / 1e6:.2f} M"
        if not runs:
            lines.append(f"| {TRANSLATION.label(config)} | | | {compute} | 0 | | | no finished runs | | | | | |")
            continue
        per_seed = ", ".join(f"{run.bleu_13a:.2f} (seed {run.seed})" for run in runs)
        lines.append(
            f"| {TRANSLATION.label(config)} | {runs[0].parameters:,} | {runs[0].encoder_layer_evaluations} | {compute} "
            f"| {len(runs)} "
            f"| {'/'.join(sorted({str(run.updates) for run in runs}))} "
            f"| {statistics.mean(run_flops(run, count) for run in runs):.2e} "
            f"| {mean_sd([run.bleu_13a for run in runs])} | {p_value_cell(config, p_values)} | {per_seed} "
            f"| {mean_sd([run.bleu_tokenised for run in runs])} "
            f"| {mean_sd([run.final_valid_nll for run in runs], digits=3)} "
            f"| {statistics.mean(run.training_minutes for run in runs):.1f} |"
        )
    lines += paired_differences(by_config, BASELINE)
    lines += compared_with_pairs(by_config, references, lang)
    lines += front_lines(by_config, flops)
    lines += learning_curves(by_config)
    signatures = sorted({run.signature for runs in by_config.values() for run in runs})
    lines += ["", "sacreBLEU signature: " + "; ".join(signatures or ["none"])]
    return "\n".join(lines) + "\n"


def scored_points(by_config: Dict[str, List[Run]], flops: Dict[str, FlopCount]) -> List[tuple]:
    """(training FLOPs, sacreBLEU 13a, configuration, seed) of every scored run."""
    return [
        (run_flops(run, flops[config]), run.bleu_13a, config, run.seed)
        for config, runs in by_config.items()
        for run in runs
    ]


def front_lines(by_config: Dict[str, List[Run]], flops: Dict[str, FlopCount]) -> List[str]:
    """The runs on the Pareto front of sacreBLEU against training FLOPs, cheapest first."""
    points = scored_points(by_config, flops)
    if not points:
        return []
    front = pareto_front([(cost, -bleu) for cost, bleu, _, _ in points])
    return [
        "",
        "The Pareto front of sacreBLEU against training FLOPs (no other run is both cheaper and better), "
        "cheapest first: "
        + "; ".join(
            f"{TRANSLATION.label(points[i][2])} seed {points[i][3]} ({points[i][0]:.2e}, {points[i][1]:.2f})"
            for i in front
        )
        + ".",
    ]


def draw_compute(by_config: Dict[str, List[Run]], flops: Dict[str, FlopCount], path: Path) -> None:
    """Validation NLL along training FLOPs (a run's FLOPs spread evenly over its updates), and every
    run's sacreBLEU against its training FLOPs, with the Pareto front."""
    from ode_seq.analysis.plots import plot_score_against_compute

    points = scored_points(by_config, flops)
    front = pareto_front([(cost, -bleu) for cost, bleu, _, _ in points])
    plot_score_against_compute(
        curves={
            TRANSLATION.label(config): [
                [(run_flops(run, flops[config]) * u / run.updates, nll) for u, nll in sorted(run.valid_nll.items())]
                for run in runs
            ]
            for config, runs in by_config.items()
        },
        points={
            TRANSLATION.label(config): [(cost, bleu) for cost, bleu, c, _ in points if c == config]
            for config in by_config
            if by_config[config]
        },
        front=[points[i][:2] for i in front],
        metric="sacreBLEU 13a (test)",
        curve_metric="validation NLL (bits per target token)",
        path=str(path),
    )


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs-dir", type=Path, required=True)
    parser.add_argument("--configs", nargs="+", choices=sorted(TRANSLATION.names()), default=TRANSLATION.names())
    parser.add_argument("--recipe", default="", help="a line describing the training recipe")
    parser.add_argument("--ref", type=Path, required=True, help="the test set's detokenised references")
    parser.add_argument("--lang", default="es", help="target language (default: es, the bundled corpus)")
    parser.add_argument("--flops-dir", type=Path, required=True, help="CONFIG.txt: the configuration's FLOP count")
    parser.add_argument("--compute-figure", type=Path, help="validation NLL and BLEU against training FLOPs (PNG)")
    args = parser.parse_args(argv)
    if not args.runs_dir.is_dir():
        parser.error(f"--runs-dir {args.runs_dir} does not exist; run quality_study.sh first")
    try:
        references = read_text_lines(args.ref, "reference")
        flops = read_flop_counts(args.flops_dir, args.configs, "quality_study.sh")
        sys.stdout.write(table(args.runs_dir, args.configs, args.recipe, references, flops, args.lang))
        if args.compute_figure:
            draw_compute({c: finished_runs(args.runs_dir, c) for c in args.configs}, flops, args.compute_figure)
    except (ValueError, KeyError, json.JSONDecodeError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
