"""``ode-seq``: one command for ode-seq's tools. ``ode-seq SUBCOMMAND [ARGS]`` hands ARGS to the tool's
own ``main(argv, prog)``, so each tool's options are defined once, in its module."""

from __future__ import annotations

import argparse
import importlib
import sys
from dataclasses import dataclass
from typing import List, Optional

import ode_seq


@dataclass(frozen=True)
class Subcommand:
    module: str
    summary: str


SUBCOMMANDS = {
    "user-dir": Subcommand("ode_seq.cli.plugin_dir", "print the fairseq plugin directory, for --user-dir"),
    "average": Subcommand("ode_seq.cli.average", "average the parameters of several checkpoints"),
    "analyze": Subcommand("ode_seq.cli.analyze", "trajectories, spectra, Lyapunov exponents of a model: a report"),
    "export": Subcommand(
        "ode_seq.cli.export", "a model as a plain fairseq checkpoint, a CTranslate2 model or a Hugging Face folder"
    ),
    "bleu": Subcommand("ode_seq.metrics.bleu", "tokenised (compound-split) BLEU and sacreBLEU"),
    "rouge": Subcommand("ode_seq.metrics.rouge", "ROUGE-1/2/L/Lsum with bootstrap confidence intervals"),
    "m2": Subcommand("ode_seq.metrics.m2", "MaxMatch (M2) precision, recall and F0.5"),
    "errant": Subcommand("ode_seq.metrics.errant_score", "ERRANT span-based correction F0.5, per error type"),
}


def build_parser() -> argparse.ArgumentParser:
    listing = "\n".join(f"  {name:<10} {command.summary}" for name, command in SUBCOMMANDS.items())
    parser = argparse.ArgumentParser(
        prog="ode-seq",
        usage="ode-seq [-h] [--version] SUBCOMMAND [ARGS ...]",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="ODE Transformers for fairseq: the project's command-line tools.",
        epilog=f"subcommands:\n{listing}\n\n`ode-seq SUBCOMMAND --help` shows a subcommand's options.",
    )
    parser.add_argument("--version", action="version", version=f"ode-seq {ode_seq.__version__}")
    parser.add_argument(
        "subcommand", metavar="SUBCOMMAND", choices=SUBCOMMANDS, help=f"one of: {', '.join(SUBCOMMANDS)}"
    )
    parser.add_argument("args", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    return parser


def main(argv: Optional[List[str]] = None) -> int:
    parser = build_parser()
    argv = sys.argv[1:] if argv is None else argv
    if not argv:
        parser.error("name a subcommand (`ode-seq --help` lists them), e.g. `ode-seq bleu --help`")
    args = parser.parse_args(argv)
    command = SUBCOMMANDS[args.subcommand]
    tool = importlib.import_module(command.module)
    return tool.main(args.args, prog=f"ode-seq {args.subcommand}")


if __name__ == "__main__":
    sys.exit(main())
