"""Correctness of ode-seq on one device and in reduced precision: ``python -m benchmarks.gpu_checks``.

Runs the groups of checks below, each line of ``--out`` one result as JSON, written as it
completes (a run cut short keeps what it finished).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any, Callable, Dict, Iterator, Optional, Sequence, TextIO

import torch

import user_dir  # noqa: F401  (registers the models, applies the fairseq fixes)
from testkit import device_checks
from testkit.device_checks import GPU_SIZES, SMOKE_SIZES, Sizes, adaptive_checks, decoding_checks, training_checks

GROUPS: Dict[str, Callable[..., Iterator[Dict[str, Any]]]] = {
    "decoding": lambda sizes, device, data_bin: decoding_checks(sizes, device),
    "adaptive": lambda sizes, device, data_bin: adaptive_checks(sizes, device),
    "training": training_checks,
}


def run_checks(groups: Sequence[str], sizes: Sizes, device: str, data_bin: str, out: TextIO) -> int:
    """Run ``groups``, one JSON line per check; returns the number of failed checks."""
    failed = 0
    for group in groups:
        started = time.perf_counter()
        for result in GROUPS[group](sizes, device, data_bin):
            result["device"] = device
            out.write(json.dumps(result) + "\n")
            out.flush()
            failed += not result["passed"]
            if not result["passed"]:
                print(f"FAILED {json.dumps(result)}", file=sys.stderr, flush=True)
        print(f"[checks] {group}: {time.perf_counter() - started:.1f} s", file=sys.stderr, flush=True)
    return failed


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.gpu_checks",
        description=f"{__doc__}\n{device_checks.__doc__}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument("--smoke", action="store_true", help="tiny models (for the test suite)")
    parser.add_argument("--data-bin", required=True, help="a fairseq data-bin for the training checks")
    parser.add_argument("--groups", nargs="+", choices=list(GROUPS), default=list(GROUPS))
    parser.add_argument("--out", required=True, help="JSON-lines file of results (appended)")
    args = parser.parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda, but torch sees no CUDA device")
    sizes = SMOKE_SIZES if args.smoke else GPU_SIZES
    with open(args.out, "a", encoding="utf-8") as out:
        failed = run_checks(args.groups, sizes, args.device, args.data_bin, out)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
