"""``ode-seq``: one command for ode-seq's tools. ``ode-seq SUBCOMMAND [ARGS]`` hands ARGS to the tool's
own ``main(argv, prog)``, so each tool's options are defined once, in its module."""

from __future__ import annotations

import argparse
import sys
from types import ModuleType
from typing import List, Optional

import ode_seq

SUBCOMMANDS = {
    "user-dir": "print the fairseq plugin directory, for --user-dir",
    "average": "average the parameters of several checkpoints",
    "analyze": "trajectories, spectra, Lyapunov exponents of a model: a report",
    "export": "a model as a plain fairseq checkpoint, a CTranslate2 model or a Hugging Face folder",
    "as-residual": "an ODE model's layers as the residual model of the same layers, to fine-tune",
    "bleu": "tokenised (compound-split) BLEU and sacreBLEU",
    "rouge": "ROUGE-1/2/L/Lsum with bootstrap confidence intervals",
    "m2": "MaxMatch (M2) precision, recall and F0.5",
    "errant": "ERRANT span-based correction F0.5, per error type",
    "flops": "counted training and inference FLOPs per token of a fairseq-train command line",
}


def tool(subcommand: str) -> ModuleType:
    """The module of ``subcommand``, imported only when it runs: the tools import torch, fairseq or
    sacrebleu (seconds), and ``ode-seq --help`` needs none of them."""
    match subcommand:
        case "user-dir":
            from ode_seq.cli import plugin_dir as module
        case "average":
            from ode_seq.cli import average as module
        case "analyze":
            from ode_seq.cli import analyze as module
        case "export":
            from ode_seq.cli import export as module
        case "as-residual":
            from ode_seq.cli import as_residual as module
        case "bleu":
            from ode_seq.metrics import bleu as module
        case "rouge":
            from ode_seq.metrics import rouge as module
        case "m2":
            from ode_seq.metrics import m2 as module
        case "errant":
            from ode_seq.metrics import errant_score as module
        case "flops":
            from ode_seq.cli import flops as module
        case _:
            raise ValueError(f"unknown subcommand {subcommand!r}; choose one of: {', '.join(SUBCOMMANDS)}")
    return module


def build_parser() -> argparse.ArgumentParser:
    listing = "\n".join(f"  {name:<10} {summary}" for name, summary in SUBCOMMANDS.items())
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
    return tool(args.subcommand).main(args.args, prog=f"ode-seq {args.subcommand}")


if __name__ == "__main__":
    sys.exit(main())
