"""The tables and the figure of the language-model study (study.sh).

A run is GRID_DIR/CONFIG/lrLR/seedS with train.sh's train.log (one validation per epoch),
eval-test/scores.txt (evaluate.sh: test perplexity of the best checkpoint) and
eval-test/verse-scores.txt (per test line: natural-log likelihood and tokens); a tuning run's
first epochs are logged in its tuning.log. A run made from a teacher's layers is paired with the
teacher run it was made from: the run in its teacher/ directory (a teacher retrained for it), else
the study's run of the teacher at the same lr and seed.

    lm_study_table.py --grid-dir DIR --tune-seed S --tuned A B --tune-lrs L1 L2 ... --tune-epochs N --best CONFIG
        prints the lr whose tuning run (seed S) has the lowest validation loss in its first N epochs
    lm_study_table.py ... --speed-dir DIR --configs A B ... --seeds 1 2 3 --jobs J
        the speed check's table: every configuration's training tokens/s (DIR/CONFIG/train.log, a
        short training of each), minutes per epoch, and the run-hours of the whole study
    lm_study_table.py ... --chosen-dir DIR --configs A B ... --flops-dir DIR [--figure PNG] [--compute-figure PNG]
        the tuning table, the study table (DIR/CONFIG links to the chosen lr's seeds) with each
        seed's difference from the residual model and its paired-bootstrap p-value over test
        verses (perplexity recomputed on 1,000 resamples of the verses, ode_seq.metrics.paired_bootstrap),
        each configuration's compute (FLOPS_DIR/CONFIG.txt: `ode-seq flops` of its first batch) and
        the mean validation curves; the figure draws every run's validation curve, the compute
        figure every run against its training FLOPs, with the Pareto front

Training FLOPs to the scored checkpoint = training FLOPs per token × the training tokens seen up to
the best epoch (each epoch's updates × its mean tokens per update, from train.log); a run made from a
teacher's layers adds the teacher's training FLOPs to its scored checkpoint.

Perplexities are e^(−Σ log-likelihood / Σ tokens) (fairseq's 2^loss in bits).
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence

import numpy as np

from ode_seq.analysis.flops import FlopCount, pareto_front, read_flop_counts, training_tokens
from ode_seq.metrics.paired_bootstrap import DEFAULT_SAMPLES, compare, draw_counts, resample_indices
from ode_seq.metrics.seeds import mean_or_none, mean_sd, pairs_by_seed
from ode_seq.solvers import get_tableau
from ode_seq.studies import LANGUAGE_MODEL, PARAMS, TRAINING_SECONDS

BASELINE = LANGUAGE_MODEL.baseline
TEACHERS = LANGUAGE_MODEL.pairs("teacher")  # configuration → the one whose trained layers it starts from
VALID = re.compile(r"\| epoch (\d+) \| valid on 'valid' subset \| loss ([\d.]+) \|")
TRAIN_EPOCH = re.compile(r"\| train \| epoch (\d+) \| .*?\| wps ([\d.]+) \| .*?\| train_wall ([\d.]+) \|")
TRAIN_INNER = re.compile(r"epoch \d+:\s+\d+ / (\d+) .*?wps=([\d.]+), ups=[\d.]+, wpb=([\d.]+)")
EARLY_STOP = re.compile(r"early stop since valid performance hasn't improved for last (\d+) runs")
TEST_PPL = re.compile(r"perplexity ([\d.]+) \(")
OPTION = r"\b{}=(?:'(\w+)'|(\d+))"


@dataclass
class Run:
    seed: int
    parameters: int
    evaluations: int  # layer evaluations per token of the stack
    valid_bits: List[float]  # validation loss (bits per token) after each epoch
    tokens_seen: List[float]  # training tokens seen by the end of each epoch
    stopped_by: str  # "patience" or "epoch cap"
    tokens_per_second: float
    minutes: float  # in training updates, summed over the epochs (a resumed run's included)
    test_perplexity: Optional[float]
    verses: Optional[np.ndarray]  # (verses, 2): log-likelihood, tokens
    directory: Path
    teacher: Optional[Run] = None  # the run whose layers it was made from (teacher_run)

    @property
    def best_valid_perplexity(self) -> float:
        return 2 ** min(self.valid_bits)

    @property
    def best_epoch(self) -> int:
        return 1 + self.valid_bits.index(min(self.valid_bits))


def _option(log: str, name: str, default: str) -> str:
    match = re.search(OPTION.format(name), log)
    return next((group for group in match.groups() if group), default) if match else default


def layer_evaluations(log: str) -> int:
    """Layers × steps × (stages of the method, plus one for a corrector), from the logged options."""
    stages = get_tableau(_option(log, "decoder_ode_method", "euler")).stages
    corrector = _option(log, "decoder_ode_corrector", "none") != "none"
    return int(_option(log, "decoder_layers", "1")) * int(_option(log, "decoder_ode_steps", "1")) * (stages + corrector)


def by_epoch(matches: Sequence[tuple]) -> List[tuple]:
    """The fields after the epoch of each epoch's last match, in epoch order (an epoch that a
    resumed run trained again is counted once)."""
    last = {int(epoch): fields for epoch, *fields in matches}
    return [last[epoch] for epoch in sorted(last)]


def validation_bits(log: str) -> List[float]:
    """Validation loss (bits per token) after each epoch of a train.log."""
    return [float(bits) for (bits,) in by_epoch(VALID.findall(log))]


def read_run(run_dir: Path, max_epoch: int, seed: int) -> Optional[Run]:
    """The finished run in ``run_dir`` (None before its training ended)."""
    log_file = run_dir / "train.log"
    log = log_file.read_text(encoding="utf-8") if log_file.is_file() else ""
    params = PARAMS.search(log)
    if not TRAINING_SECONDS.search(log) or params is None:
        return None
    valid, epochs = validation_bits(log), by_epoch(TRAIN_EPOCH.findall(log))
    stopped_by = "patience" if EARLY_STOP.search(log) else "epoch cap" if len(valid) >= max_epoch else "its budget"
    scores, verses = run_dir / "eval-test" / "scores.txt", run_dir / "eval-test" / "verse-scores.txt"
    test = TEST_PPL.search(scores.read_text(encoding="utf-8")) if scores.is_file() else None
    return Run(
        seed=seed,
        parameters=int(params.group(1).replace(",", "")),
        evaluations=layer_evaluations(log),
        valid_bits=valid,
        tokens_seen=training_tokens(log),
        stopped_by=stopped_by,
        tokens_per_second=statistics.mean(float(wps) for wps, _ in epochs) if epochs else float("nan"),
        minutes=sum(float(wall) for _, wall in epochs) / 60,
        test_perplexity=float(test.group(1)) if test else None,
        verses=np.loadtxt(verses, ndmin=2) if verses.is_file() else None,
        directory=run_dir,
    )


def seed_of(run_dir: Path) -> int:
    return int(run_dir.name.removeprefix("seed"))


def teacher_run(run_dir: Path, teacher: str, max_epoch: int) -> Run:
    """The scored run of ``teacher`` whose layers the run in ``run_dir`` was made from: the one its
    teacher/ directory holds (a teacher retrained for it), else the study's run of the same lr and seed."""
    grid_run = run_dir.resolve()
    path = run_dir / "teacher"
    if not path.is_dir():
        path = grid_run.parents[2] / teacher / grid_run.parent.name / grid_run.name
    run = read_run(path, max_epoch, seed_of(run_dir))
    if run is None or run.test_perplexity is None or run.verses is None:
        raise ValueError(
            f"{run_dir} was made from {teacher}'s layers, but {path} holds no scored run of it: rerun study.sh"
        )
    return run


def runs_of(setting_dir: Path, max_epoch: int, teacher: Optional[str] = None) -> List[Run]:
    """The finished runs of one setting (CONFIG/lrLR), each with its ``teacher``'s run where it has one."""
    runs = []
    for run_dir in sorted(setting_dir.glob("seed*")):
        run = read_run(run_dir, max_epoch, seed_of(run_dir))
        if run is None:
            continue
        if teacher:
            run.teacher = teacher_run(run_dir, teacher, max_epoch)
        runs.append(run)
    return sorted(runs, key=lambda run: run.seed)


@dataclass
class Speed:
    parameters: int
    evaluations: int
    tokens_per_second: float  # median over the logged intervals
    tokens_per_epoch: float

    @property
    def minutes_per_epoch(self) -> float:
        return self.tokens_per_epoch / self.tokens_per_second / 60


def read_speed(run_dir: Path) -> Speed:
    """The speed of the short training in ``run_dir`` (train.log's progress lines)."""
    log_file = run_dir / "train.log"
    log = log_file.read_text(encoding="utf-8") if log_file.is_file() else ""
    params, intervals = PARAMS.search(log), TRAIN_INNER.findall(log)
    if params is None or len(intervals) < 2:
        raise ValueError(f"{run_dir} has no speed check's training log with two progress lines: rerun --speed-check")
    batches = int(intervals[0][0])
    return Speed(
        parameters=int(params.group(1).replace(",", "")),
        evaluations=layer_evaluations(log),
        tokens_per_second=statistics.median(float(wps) for _, wps, _ in intervals[1:]),  # the first warms up
        tokens_per_epoch=batches * statistics.mean(float(wpb) for _, _, wpb in intervals),
    )


def speed_table(args: argparse.Namespace) -> List[str]:
    """Each configuration's measured speed and the run-hours of its runs in the study, if every
    run stopped after 20 epochs or at the cap (a tuning run that is not chosen after its
    --tune-epochs epochs)."""
    lines = [
        "| configuration | parameters | layer evaluations per token | tokens/s (training) | minutes per epoch "
        f"| runs in the study | run-hours at 20 epochs | run-hours at {args.max_epoch} epochs (cap) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    totals = [0.0, 0.0]
    for config in args.configs:
        speed = read_speed(args.speed_dir / config)
        dropped = len(args.tune_lrs) - 1 if config in args.tuned else 0
        runs = len(args.seeds) + dropped
        hours = [
            (len(args.seeds) * epochs + dropped * min(epochs, args.tune_epochs)) * speed.minutes_per_epoch / 60
            for epochs in (20, args.max_epoch)
        ]
        totals = [t + h for t, h in zip(totals, hours)]
        lines.append(
            f"| {LANGUAGE_MODEL.label(config)} | {speed.parameters:,} | {speed.evaluations} "
            f"| {speed.tokens_per_second:,.0f} | {speed.minutes_per_epoch:.2f} | {runs} "
            f"| {hours[0]:.2f} | {hours[1]:.2f} |"
        )
    lines.append(f"| all, one after another | | | | | | {totals[0]:.2f} | {totals[1]:.2f} |")
    wall = [total / args.jobs for total in totals]
    lines.append(f"| all, {args.jobs} at a time (wall-clock) | | | | | | {wall[0]:.2f} | {wall[1]:.2f} |")
    return lines


def perplexity(verses: np.ndarray, counts: Optional[np.ndarray] = None) -> np.ndarray:
    """e^(−Σ ll / Σ tokens) of the verses, or of each resample (rows of ``counts``: draws per verse)."""
    if counts is None:
        return np.exp(-verses[:, 0].sum() / verses[:, 1].sum())
    return np.exp(-(counts @ verses[:, 0]) / (counts @ verses[:, 1]))


def paired_p_value(system: np.ndarray, baseline: np.ndarray) -> float:
    """Paired bootstrap over test verses of the perplexity difference (two-sided)."""
    if system.shape != baseline.shape or not np.array_equal(system[:, 1], baseline[:, 1]):
        raise ValueError("the two runs scored different test verses: evaluate both on the same test split")
    counts = draw_counts(resample_indices(len(system), DEFAULT_SAMPLES))
    result = compare(
        "perplexity", perplexity(system), perplexity(baseline), perplexity(system, counts), perplexity(baseline, counts)
    )
    return result.p_value


def tuning_losses(grid_dir: Path, config: str, lrs: Sequence[str], seed: int, epochs: int) -> Dict[str, float]:
    """The lowest validation loss of each lr's tuning run in its first ``epochs`` epochs."""
    losses = {}
    for lr in lrs:
        log = grid_dir / config / f"lr{lr}" / f"seed{seed}" / "tuning.log"
        valid = validation_bits(log.read_text(encoding="utf-8"))[:epochs] if log.is_file() else []
        if not valid:
            raise ValueError(f"{config} has no finished tuning run at lr {lr} (seed {seed}): rerun study.sh")
        losses[lr] = min(valid)
    return losses


def best_lr(losses: Dict[str, float]) -> str:
    return min(losses, key=losses.__getitem__)


def tuning_table(args: argparse.Namespace) -> List[str]:
    lines = [
        f"Tuning (seed {args.tune_seed}): the best validation perplexity of each peak lr in its first "
        f"{args.tune_epochs} epochs; bold is the choice, whose run trains on to convergence as seed "
        f"{args.tune_seed}.",
        "",
        f"| configuration | peak lr | best validation perplexity, epochs 1–{args.tune_epochs} |",
        "|---|---|---|",
    ]
    for config in args.tuned:
        losses = tuning_losses(args.grid_dir, config, args.tune_lrs, args.tune_seed, args.tune_epochs)
        chosen = best_lr(losses)
        for lr, bits in losses.items():
            bold = "**" if lr == chosen else ""
            lines.append(f"| {LANGUAGE_MODEL.label(config)} | {lr} | {bold}{2**bits:.2f}{bold} |")
        if chosen in (args.tune_lrs[0], args.tune_lrs[-1]) and len(args.tune_lrs) > 1:
            lines.append(f"| {LANGUAGE_MODEL.label(config)}: the choice {chosen} is at the edge of the grid | | |")
    return lines


def training_flops(config: str, run: Run, flops: Dict[str, FlopCount]) -> List[float]:
    """The training FLOPs spent by the end of each epoch of ``run`` (of ``config``), after those of
    its teacher up to the teacher's scored checkpoint where it was made from a teacher's layers."""
    start = scored_flops(TEACHERS[config], run.teacher, flops) if run.teacher else 0.0
    return [start + tokens * flops[config].training_per_token for tokens in run.tokens_seen]


def scored_flops(config: str, run: Run, flops: Dict[str, FlopCount]) -> float:
    """The training FLOPs spent up to the scored (best) checkpoint."""
    return training_flops(config, run, flops)[run.best_epoch - 1]


def scored(runs: List[Run]) -> List[Run]:
    """The runs with a test perplexity."""
    return [run for run in runs if run.test_perplexity is not None]


def study_table(args: argparse.Namespace, by_config: Dict[str, List[Run]], flops: Dict[str, FlopCount]) -> List[str]:
    lines = [
        "| configuration | parameters | layer evaluations per token | training FLOPs per token "
        "| inference FLOPs per token | seeds | test perplexity, mean ± sd | per seed "
        "| Δ against residual per seed (paired bootstrap p over verses) | best validation perplexity, mean ± sd "
        "| epochs per seed (stopped by) | training FLOPs to the scored checkpoint, mean "
        "| tokens/s (training, mean) | minutes in training updates per run (mean) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for config, runs in by_config.items():
        done = scored(runs)
        if not done:
            continue
        differences = (
            "(baseline)"
            if config == BASELINE
            else ", ".join(
                f"{run.test_perplexity - base.test_perplexity:+.2f} (p = {paired_p_value(run.verses, base.verses):.3f})"
                for run, base in pairs_by_seed(done, scored(by_config.get(BASELINE, [])))
            )
        )
        count = flops[config]
        lines.append(
            f"| {LANGUAGE_MODEL.label(config)} | {done[0].parameters:,} | {done[0].evaluations} "
            f"| {count.training_per_token / 1e6:.2f} M | {count.inference_per_token / 1e6:.2f} M | {len(done)} "
            f"| {mean_sd([r.test_perplexity for r in done])} "
            f"| {', '.join(f'{r.test_perplexity:.2f}' for r in done)} "
            f"| {differences} "
            f"| {mean_sd([r.best_valid_perplexity for r in done])} "
            f"| {', '.join(f'{len(r.valid_bits)} ({r.stopped_by})' for r in done)} "
            f"| {statistics.mean(scored_flops(config, r, flops) for r in done):.2e} "
            f"| {statistics.mean(r.tokens_per_second for r in done):,.0f} "
            f"| {statistics.mean(r.minutes for r in done):.1f} |"
        )
    return lines


def curves(by_config: Dict[str, List[Run]]) -> List[str]:
    """Mean validation perplexity after epochs 1, 2, 4, 8, …, over the seeds still training."""
    longest = max((len(r.valid_bits) for runs in by_config.values() for r in runs), default=0)
    epochs = [e for e in (1, 2, 4, 8, 16, 32) if e <= longest]
    lines = [
        "| configuration | " + " | ".join(f"epoch {e}" for e in epochs) + " |",
        "|---|" + "---|" * len(epochs),
    ]
    for config, runs in by_config.items():
        means = [
            mean_or_none(2 ** r.valid_bits[epoch - 1] for r in runs if len(r.valid_bits) >= epoch) for epoch in epochs
        ]
        cells = ["" if mean is None else f"{mean:.2f}" for mean in means]
        lines.append(f"| {LANGUAGE_MODEL.label(config)} | " + " | ".join(cells) + " |")
    return lines


def draw(by_config: Dict[str, List[Run]], path: Path) -> None:
    """Every run's validation curve: the whole run (log scale), and its last three quarters on a
    linear scale with the best epoch (the checkpoint scored) marked, where the configurations part."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt
    from matplotlib.ticker import ScalarFormatter

    longest = max((len(run.valid_bits) for runs in by_config.values() for run in runs), default=1)
    zoom_from = 1 + longest // 4
    fig, (whole, late) = plt.subplots(1, 2, figsize=(11, 4.5))
    for index, (config, runs) in enumerate(by_config.items()):
        for i, run in enumerate(runs):
            epochs, perplexity = range(1, len(run.valid_bits) + 1), [2**b for b in run.valid_bits]
            label = LANGUAGE_MODEL.label(config) if i == 0 else None
            whole.plot(epochs, perplexity, color=f"C{index}", label=label)
            late.plot(epochs[zoom_from - 1 :], perplexity[zoom_from - 1 :], color=f"C{index}")
            best = min(epochs, key=lambda epoch: perplexity[epoch - 1])
            if best >= zoom_from:  # a dot before the panel's first epoch would stretch its axes
                late.plot(best, perplexity[best - 1], "o", color=f"C{index}")
    whole.set(xlabel="epoch", ylabel="validation perplexity", yscale="log", title="Every seed, every epoch")
    late.set(xlabel="epoch", title=f"From epoch {zoom_from} (dots: each run's best epoch, the one scored)")
    for set_formatter in (whole.yaxis.set_major_formatter, whole.yaxis.set_minor_formatter):
        set_formatter(ScalarFormatter())  # 30, 40, 60 rather than 3×10¹ between the decades
    whole.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def against_teacher(run: Run, study_runs: Dict[int, Run]) -> str:
    """``run`` against the teacher run it was made from, and a retrained teacher against the study's
    run of its seed (the same recipe: equal unless training is not reproducible)."""
    teacher = run.teacher
    cell = (
        f"seed {run.seed} {run.test_perplexity - teacher.test_perplexity:+.2f} "
        f"(p = {paired_p_value(run.verses, teacher.verses):.3f}"
    )
    if teacher.directory.name != "teacher":
        return cell + ")"
    study_run = study_runs.get(run.seed)
    study = f", the study's run {study_run.test_perplexity:.2f}" if study_run else ""
    return cell + f"; its teacher retrained: {teacher.test_perplexity:.2f}{study})"


def against_teachers(by_config: Dict[str, List[Run]]) -> List[str]:
    """Each model made of a teacher's layers against the teacher run of its seed it was made from."""
    lines = []
    for config, teacher in TEACHERS.items():
        done = scored(by_config.get(config, []))
        if done:
            study_runs = {run.seed: run for run in scored(by_config.get(teacher, []))}
            lines.append(
                f"{LANGUAGE_MODEL.label(config)} against the {LANGUAGE_MODEL.label(teacher)} run it was made "
                "from (paired bootstrap p over verses): "
                + ", ".join(against_teacher(run, study_runs) for run in done)
                + "."
            )
    return lines


def scored_points(by_config: Dict[str, List[Run]], flops: Dict[str, FlopCount]) -> List[tuple]:
    """(training FLOPs to the scored checkpoint, test perplexity, configuration, seed) of every scored run."""
    return [
        (scored_flops(config, run, flops), run.test_perplexity, config, run.seed)
        for config, runs in by_config.items()
        for run in scored(runs)
    ]


def front_lines(points: List[tuple]) -> List[str]:
    """The runs on the Pareto front of test perplexity against training FLOPs, cheapest first."""
    front = pareto_front([(flops, ppl) for flops, ppl, _, _ in points])
    return [
        "The Pareto front of test perplexity against training FLOPs to the scored checkpoint (no other run "
        "is both cheaper and better), cheapest first: "
        + "; ".join(
            f"{LANGUAGE_MODEL.label(points[i][2])} seed {points[i][3]} ({points[i][0]:.2e}, {points[i][1]:.2f})"
            for i in front
        )
        + "."
    ]


def equal_compute_table(by_config: Dict[str, List[Run]], flops: Dict[str, FlopCount]) -> List[str]:
    """Each run's best validation perplexity within the training FLOPs that the residual run of its seed
    spent up to its scored checkpoint (epochs ending within that budget)."""
    budgets = {run.seed: scored_flops(BASELINE, run, flops) for run in by_config.get(BASELINE, [])}
    seeds = sorted(budgets)
    if not seeds:
        return []
    lines = [
        "At the residual model's training compute: each run's best validation perplexity over the epochs "
        "that ended within the training FLOPs the residual run of its seed spent up to its scored checkpoint "
        "(— : its first epoch already cost more).",
        "",
        "| configuration | " + " | ".join(f"seed {seed} ({budgets[seed]:.2e} FLOPs)" for seed in seeds) + " | mean |",
        "|---|" + "---|" * (len(seeds) + 1),
    ]
    for config, runs in by_config.items():
        by_seed = {run.seed: run for run in runs}
        cells, values = [], []
        for seed in seeds:
            run = by_seed.get(seed)
            within = (
                []
                if run is None
                else [
                    2**bits
                    for bits, spent in zip(run.valid_bits, training_flops(config, run, flops))
                    if spent <= budgets[seed]
                ]
            )
            cells.append(f"{min(within):.2f}" if within else "—")
            values += [min(within)] if within else []
        mean = f"{statistics.mean(values):.2f}" if len(values) == len(seeds) else "—" if not values else ""
        lines.append(f"| {LANGUAGE_MODEL.label(config)} | " + " | ".join(cells) + f" | {mean} |")
    return lines


def draw_compute(by_config: Dict[str, List[Run]], flops: Dict[str, FlopCount], path: Path) -> None:
    """Validation perplexity along training FLOPs, and every run's test perplexity at the FLOPs of its
    scored checkpoint with the Pareto front."""
    from ode_seq.analysis.plots import plot_score_against_compute

    points = scored_points(by_config, flops)
    front = pareto_front([(f, ppl) for f, ppl, _, _ in points])
    plot_score_against_compute(
        curves={
            LANGUAGE_MODEL.label(config): [
                list(zip(training_flops(config, run, flops), (2**b for b in run.valid_bits))) for run in runs
            ]
            for config, runs in by_config.items()
        },
        points={
            LANGUAGE_MODEL.label(config): [(f, ppl) for f, ppl, c, _ in points if c == config]
            for config in by_config
            if any(c == config for _, _, c, _ in points)
        },
        front=[points[i][:2] for i in front],
        metric="test perplexity",
        curve_metric="validation perplexity",
        path=str(path),
    )


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--grid-dir", type=Path, required=True)
    parser.add_argument("--tune-seed", type=int, required=True)
    parser.add_argument("--tuned", nargs="+", required=True)
    parser.add_argument("--tune-lrs", nargs="+", required=True)
    parser.add_argument("--tune-epochs", type=int, required=True, help="the epochs of a tuning run")
    parser.add_argument("--max-epoch", type=int, required=True)
    parser.add_argument("--patience", type=int, required=True)
    parser.add_argument("--best", help="print the chosen lr of this configuration")
    parser.add_argument("--chosen-dir", type=Path, help="CONFIG links to the chosen lr's seeds")
    parser.add_argument("--configs", nargs="+", default=[])
    parser.add_argument("--figure", type=Path)
    parser.add_argument(
        "--flops-dir", type=Path, help="CONFIG.txt holds the configuration's FLOP count (with --chosen-dir)"
    )
    parser.add_argument("--compute-figure", type=Path, help="perplexity against training FLOPs (with --chosen-dir)")
    parser.add_argument("--speed-dir", type=Path, help="CONFIG holds the speed check's training log")
    parser.add_argument("--seeds", nargs="+", default=[], help="the study's seeds (with --speed-dir)")
    parser.add_argument("--jobs", type=int, default=1, help="runs at a time (with --speed-dir)")
    args = parser.parse_args(argv)
    try:
        if args.speed_dir:
            print("\n".join(speed_table(args)))
            return 0
        if args.best:
            print(best_lr(tuning_losses(args.grid_dir, args.best, args.tune_lrs, args.tune_seed, args.tune_epochs)))
            return 0
        if args.chosen_dir is None or args.flops_dir is None:
            parser.error("give --best CONFIG, --speed-dir DIR or --chosen-dir DIR with --flops-dir DIR")
        by_config = {
            config: runs_of(args.chosen_dir / config, args.max_epoch, TEACHERS.get(config)) for config in args.configs
        }
        counted = list(dict.fromkeys([*args.configs, *(TEACHERS[c] for c in args.configs if c in TEACHERS)]))
        flops = read_flop_counts(args.flops_dir, counted, "study.sh")
        lines = [
            *tuning_table(args),
            "",
            *study_table(args, by_config, flops),
            "",
            *against_teachers(by_config),
            "",
            *front_lines(scored_points(by_config, flops)),
            "",
            *equal_compute_table(by_config, flops),
            "",
            "Validation perplexity along training (mean over the seeds that reached the epoch):",
            "",
            *curves(by_config),
        ]
        print("\n".join(lines))
        if args.figure:
            draw(by_config, args.figure)
        if args.compute_figure:
            draw_compute(by_config, flops, args.compute_figure)
        return 0
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
