"""The metric tools run as a user runs them, from the repository root, and the text files they read."""

from __future__ import annotations

import gzip
import subprocess
import sys
from pathlib import Path
from typing import Iterable

REPO_ROOT = Path(__file__).resolve().parents[2]
CORPUS = REPO_ROOT / "examples" / "translation" / "data"
SCORE_SH = REPO_ROOT / "examples" / "translation" / "score.sh"


def run_score(*args: str) -> subprocess.CompletedProcess:
    """examples/translation/score.sh ``args``."""
    return subprocess.run([str(SCORE_SH), *args], capture_output=True, text=True, timeout=120)


def run_metric(module: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """``python -m ode_seq.metrics.MODULE ARGS`` from the repository root."""
    return subprocess.run(
        [sys.executable, "-m", f"ode_seq.metrics.{module}", *args],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def score_spanish(hyp: Path, ref: Path, *options: str) -> subprocess.CompletedProcess:
    """score.sh of the Spanish hypotheses ``hyp`` against ``ref``; ``options`` follow."""
    return run_score("--hyp", str(hyp), "--ref", str(ref), "--lang", "es", *options)


def spanish_references(count: int) -> list[str]:
    """The first ``count`` Spanish references of the bundled corpus's test split."""
    with gzip.open(CORPUS / "test.tsv.gz", "rt", encoding="utf-8") as f:
        return [line.rstrip("\n").split("\t")[2] for line in f][1 : count + 1]


def write_lines(path: Path, lines: Iterable[str]) -> Path:
    """``path`` holding ``lines``, one a line, in UTF-8."""
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path
