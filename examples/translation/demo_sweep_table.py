#!/usr/bin/env python3
"""Markdown table of a demo sweep (demo_sweep.sh): one row per setting.

    demo_sweep_table.py --work-dir DIR [--threads N] SETTING [SETTING ...]

Reads, for each setting, DIR/SETTING/options.txt (its run_bible_demo.sh options), time.txt (wall,
user and system seconds of the whole run, written by /usr/bin/time), the sacreBLEU 13a score in
demo.out, and the number of updates and fairseq's training time in the training log. A setting without time.txt has not
finished and gets a row that says so.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import Dict, List, Optional

SCORE = re.compile(r"^sacreBLEU 13a:\s+BLEU = ([0-9.]+)", re.M)
TRAINING_SECONDS = re.compile(r"done training in ([0-9.]+) seconds")


def row(run_dir: Path) -> Optional[Dict[str, str]]:
    """The setting's numbers, or None when its run has not finished (no time.txt yet)."""
    if not (run_dir / "time.txt").exists():
        return None
    wall, user, system = map(float, (run_dir / "time.txt").read_text().split()[-3:])
    out = (run_dir / "demo.out").read_text(encoding="utf-8")
    score = SCORE.search(out)
    if score is None:
        raise ValueError(f"{run_dir}/demo.out holds no sacreBLEU 13a score; rerun the setting")
    (log,) = run_dir.glob("checkpoints/*/train.log")
    text = log.read_text(encoding="utf-8")
    updates = max(int(u) for u in re.findall(r"num_updates[ =](\d+)", text))
    seconds = TRAINING_SECONDS.search(text)
    return {
        "options": (run_dir / "options.txt").read_text(encoding="utf-8").strip(),
        "updates": str(updates),
        "updates_per_second": f"{updates / float(seconds.group(1)):.2f}" if seconds else "",
        "cpu_minutes": f"{(user + system) / 60:.1f}",
        "wall_minutes": f"{wall / 60:.1f}",
        "bleu": score.group(1),
    }


def main(argv: List[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work-dir", type=Path, required=True)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("settings", nargs="+")
    args = parser.parse_args(argv)
    print(
        f"Whole runs of run_bible_demo.sh, {args.threads} thread(s) each "
        "(CPU minutes: user + system of every process of the run).\n"
    )
    print(
        "| setting | run_bible_demo.sh options | updates | updates/s | test sacreBLEU 13a "
        "| CPU minutes | wall minutes |"
    )
    print("|---|---|---|---|---|---|---|")
    for name in args.settings:
        r = row(args.work_dir / name)
        if r is None:
            print(f"| {name} | not finished: run demo_sweep.sh --settings {name} | | | | | |")
            continue
        print(
            f"| {name} | `{r['options']}` | {r['updates']} | {r['updates_per_second']} | {r['bleu']} "
            f"| {r['cpu_minutes']} "
            f"| {r['wall_minutes']} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
