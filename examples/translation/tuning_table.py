"""The tuning of quality_study.sh --tune: per configuration and setting (peak learning rate /
warmup), the validation NLL (bits per target token) along training and at the last update, of
one seed's training run GRID_DIR/CONFIG/lrLR-warmupN/seedS. The setting of lowest final
validation NLL is chosen (the first listed on a tie).

    tuning_table.py --grid-dir DIR --seed S --config CONFIG LR/WARMUP ... [--config ...]
        a Markdown table of every setting listed, the chosen ones in bold
    tuning_table.py --grid-dir DIR --seed S --best CONFIG --settings LR/WARMUP ...
        prints the chosen setting of CONFIG as "LR WARMUP"
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence

from study_table import CURVE_SPACING, VALID_NLL  # its neighbour: run as a script, its folder is on sys.path

from ode_seq.studies import TRANSLATION


@dataclass(frozen=True)
class Setting:
    lr: str
    warmup: str

    @classmethod
    def parse(cls, text: str) -> "Setting":
        lr, slash, warmup = text.partition("/")
        if not slash or not lr or not warmup.isdigit():
            raise argparse.ArgumentTypeError(f"a setting is LR/WARMUP such as 2e-3/300, got '{text}'")
        return cls(lr, warmup)


def valid_nll(grid_dir: Path, config: str, setting: Setting, seed: int) -> Dict[int, float]:
    """Update → validation NLL of a finished run; ValueError naming the run when it is unfinished."""
    run_dir = grid_dir / config / f"lr{setting.lr}-warmup{setting.warmup}" / f"seed{seed}"
    if not (run_dir / "train.done").is_file():
        raise ValueError(f"{run_dir} has not finished training; rerun quality_study.sh --tune to resume")
    curve = {
        int(update): float(nll)
        for nll, update in VALID_NLL.findall((run_dir / "train.log").read_text(encoding="utf-8"))
    }
    if not curve:
        raise ValueError(f"{run_dir}/train.log has no validation line")
    return curve


def best(curves: Dict[Setting, Dict[int, float]]) -> Setting:
    return min(curves, key=lambda setting: curves[setting][max(curves[setting])])


def table(grid_dir: Path, seed: int, settings: Dict[str, List[Setting]]) -> str:
    curves = {config: {s: valid_nll(grid_dir, config, s, seed) for s in tried} for config, tried in settings.items()}
    updates = sorted(
        {
            u
            for by_setting in curves.values()
            for curve in by_setting.values()
            for u in curve
            if u % CURVE_SPACING == 0 or u == max(curve)
        }
    )
    lines = [
        f"Tuning runs (seed {seed}, training only): validation NLL in bits/token along training; "
        "the setting of lowest NLL at the last update (bold) is each configuration's choice.",
        "",
        "| configuration | peak lr | warmup | " + " | ".join(f"{u} updates" for u in updates) + " |",
        "|---|---|---|" + "---|" * len(updates),
    ]
    notes = []
    for config, by_setting in curves.items():
        chosen = best(by_setting)
        for setting, curve in by_setting.items():
            cells = [f"{curve[u]:.3f}" if u in curve else "" for u in updates]
            if setting == chosen:
                cells = [f"**{cell}**" if cell else cell for cell in cells]
            lines.append(
                f"| {TRANSLATION.label(config)} | {setting.lr} | {setting.warmup} | " + " | ".join(cells) + " |"
            )
        for name, value, tried in (
            ("peak lr", chosen.lr, [s.lr for s in by_setting if s.warmup == chosen.warmup]),
            ("warmup", chosen.warmup, [s.warmup for s in by_setting if s.lr == chosen.lr]),
        ):
            numbers = sorted({float(v) for v in tried})
            if len(numbers) > 2 and float(value) in (numbers[0], numbers[-1]):
                notes.append(
                    f"{TRANSLATION.label(config)}: the chosen {name} {value} is the "
                    f"{'smallest' if float(value) == numbers[0] else 'largest'} tried at this "
                    f"{'warmup' if name == 'peak lr' else 'peak lr'}."
                )
    return "\n".join(lines + ([""] + notes if notes else [])) + "\n"


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--grid-dir", type=Path, required=True)
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument(
        "--config",
        nargs="+",
        action="append",
        default=[],
        metavar=("CONFIG", "LR/WARMUP"),
        help="a configuration and the settings tried for it",
    )
    parser.add_argument("--best", choices=sorted(TRANSLATION.names()), help="print this configuration's chosen setting")
    parser.add_argument("--settings", nargs="+", type=Setting.parse, default=[], metavar="LR/WARMUP")
    args = parser.parse_args(argv)
    if (args.best is None) == (not args.config):
        parser.error("give either --best CONFIG --settings … or one --config CONFIG LR/WARMUP … per configuration")
    if args.best is not None and not args.settings:
        parser.error("--best needs --settings LR/WARMUP …")
    try:
        if args.best is not None:
            chosen = best({s: valid_nll(args.grid_dir, args.best, s, args.seed) for s in args.settings})
            print(chosen.lr, chosen.warmup)
            return 0
        settings = {}
        for config, *tried in args.config:
            if config not in TRANSLATION.names() or not tried:
                parser.error(
                    f"--config needs one of {', '.join(sorted(TRANSLATION.names()))} and its settings, "
                    f"got {' '.join([config, *tried])}"
                )
            settings[config] = [Setting.parse(text) for text in tried]
        sys.stdout.write(table(args.grid_dir, args.seed, settings))
    except (ValueError, argparse.ArgumentTypeError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
