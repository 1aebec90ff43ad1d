#!/usr/bin/env python3
"""Turn fairseq-train's output into what a user needs: progress, time left and validation.

    fairseq-train … 2>&1 | train_progress.py --max-update N --log train.log [--expected-ups U]

Every input line is appended to ``--log`` (the full record); standard error gets one line per
fairseq log interval — ``update 120/1500 (8%) | loss 7.41 | 1.52 updates/s | ~15 min left`` —
and one per validation. With ``--expected-ups`` (the speed measured for this setting on an idle
reference machine) the first progress line states it, and a clear warning appears as soon as
20 updates show the machine to be much slower. Speed is measured from fairseq's own ``wall``
clock after the first logged interval (which includes start-up). When the input ends without
fairseq's "done training", the last lines of the log are shown, since they hold the error.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import deque
from dataclasses import dataclass, field
from typing import Deque, Dict, Optional, TextIO

FIELDS = re.compile(r"(\w+)[= ]([-+0-9.e]+)")
SLOW_FACTOR = 0.6  # warn below 60% of the expected speed
WARN_AFTER_UPDATES = 20
TAIL_LINES = 30


def log_fields(line: str) -> Dict[str, float]:
    """``name=value`` / ``name value`` pairs of a fairseq log line, as numbers."""
    values = {}
    for name, value in FIELDS.findall(line):
        try:
            values[name] = float(value)
        except ValueError:
            continue
    return values


@dataclass
class Progress:
    """Speed and time left from fairseq's ``train_inner`` lines."""

    max_update: int
    expected_ups: Optional[float] = None
    first: Optional[tuple] = None  # (updates, wall seconds) at the first logged interval
    warned: bool = False
    tail: Deque[str] = field(default_factory=lambda: deque(maxlen=TAIL_LINES))

    def rate(self, updates: float, wall: float, fairseq_ups: float) -> float:
        if self.first is None or wall <= self.first[1]:
            return fairseq_ups
        return (updates - self.first[0]) / (wall - self.first[1])

    def train_line(self, values: Dict[str, float]) -> str:
        updates, wall = values["num_updates"], values.get("wall", 0.0)
        ups = self.rate(updates, wall, values.get("ups", 0.0))
        if self.first is None:
            self.first = (updates, wall)
        left = (self.max_update - updates) / ups if ups > 0 and self.max_update else None
        parts = [f"update {updates:.0f}/{self.max_update}" if self.max_update else f"update {updates:.0f}"]
        if self.max_update:
            parts[0] += f" ({100 * updates / self.max_update:.0f}%)"
        parts.append(f"loss {values.get('loss', float('nan')):.2f}")
        if ups > 0:
            speed = f"{ups:.2f} updates/s"
            if self.expected_ups and updates <= self.first[0]:
                speed += f" (expected on an idle 2-core machine: {self.expected_ups:.2f})"
            parts.append(speed)
        if left is not None:
            parts.append(f"~{format_duration(left)} left")
        return " | ".join(parts)

    def slow_warning(self, values: Dict[str, float]) -> Optional[str]:
        if self.warned or not self.expected_ups or self.first is None:
            return None
        updates = values["num_updates"]
        if updates - self.first[0] < WARN_AFTER_UPDATES:
            return None
        ups = self.rate(updates, values.get("wall", 0.0), values.get("ups", 0.0))
        self.warned = True
        if ups >= SLOW_FACTOR * self.expected_ups:
            return None
        total = self.max_update / ups if self.max_update else 0.0
        return (
            f"warning: this machine trains at {ups:.2f} updates/s, {self.expected_ups / ups:.1f}x "
            f"slower than the {self.expected_ups:.2f} measured on an idle 2-core machine; training "
            f"will take about {format_duration(total)}. Other programs on the CPU cores slow it down "
            "most (check with `top`); the result will be the same, only later."
        )


def format_duration(seconds: float) -> str:
    minutes = seconds / 60
    return f"{seconds:.0f} s" if minutes < 1 else f"{minutes:.0f} min"


def follow(lines: TextIO, log: TextIO, out: TextIO, progress: Progress) -> bool:
    """Copy ``lines`` to ``log`` and report to ``out``; True when training finished normally."""
    finished = False
    for line in lines:
        log.write(line)
        log.flush()
        progress.tail.append(line.rstrip("\n"))
        if "| train_inner |" in line:
            values = log_fields(line.split("| train_inner |", 1)[1])
            if "num_updates" in values:
                print(progress.train_line(values), file=out, flush=True)
                warning = progress.slow_warning(values)
                if warning:
                    print(warning, file=out, flush=True)
        elif "| valid |" in line and "valid on" in line:
            values = log_fields(line.split("subset", 1)[1])
            print(
                f"validation after {values.get('num_updates', 0):.0f} updates: "
                f"loss {values.get('loss', float('nan')):.2f}, "
                f"perplexity {values.get('ppl', float('nan')):.1f}",
                file=out,
                flush=True,
            )
        elif "done training in" in line:
            finished = True
            print(line.split("| ", 3)[-1].strip(), file=out, flush=True)
    return finished


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--max-update", type=int, default=0, help="the run's update budget (0: none)")
    parser.add_argument("--expected-ups", type=float, help="updates/s of an idle reference machine")
    parser.add_argument("--log", required=True, help="file to append every input line to")
    args = parser.parse_args(argv)
    progress = Progress(args.max_update, args.expected_ups)
    with open(args.log, "a", encoding="utf-8") as log:
        finished = follow(sys.stdin, log, sys.stderr, progress)
    if not finished:
        print(f"fairseq-train stopped early; the last lines of {args.log}:", file=sys.stderr)
        print("\n".join(progress.tail), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
