"""A tiny reversal corpus (the target is the source read backwards) and its binarisation,
shared by the tests that run fairseq's command-line tools."""

from __future__ import annotations

import random
import subprocess
from pathlib import Path
from typing import Dict, List, Sequence

from tests.e2e.cli import run

WORDS = [f"w{i}" for i in range(24)]
SIZES = {"train": 400, "valid": 20, "test": 20}
# The slice of the bundled Bible corpus that the translation pipelines' tests prepare (prepare_bible.sh options).
BIBLE_SLICE = [
    "--train-pairs",
    "200",
    "--valid-pairs",
    "16",
    "--test-pairs",
    "16",
    "--vocab-size",
    "250",
    "--workers",
    "1",
]


def reversal_pairs(n: int, rng: random.Random) -> List[List[str]]:
    """``n`` random sentences of 2–9 words; the target of each is the source reversed."""
    return [[rng.choice(WORDS) for _ in range(rng.randint(2, 9))] for _ in range(n)]


def write_parallel(prefix: Path, sources: Sequence[str], targets: Sequence[str]) -> None:
    prefix.with_suffix(".src").write_text("".join(s + "\n" for s in sources))
    prefix.with_suffix(".tgt").write_text("".join(t + "\n" for t in targets))


def write_reversal_corpus(directory: Path, sizes: Dict[str, int] = SIZES, seed: int = 0) -> None:
    """``{split}.src`` / ``{split}.tgt`` for every split in ``sizes``."""
    rng = random.Random(seed)
    for split, n in sizes.items():
        pairs = reversal_pairs(n, rng)
        write_parallel(directory / split, [" ".join(p) for p in pairs], [" ".join(reversed(p)) for p in pairs])


def preprocess(
    raw: Path,
    destdir: Path,
    splits: Sequence[str] = ("train", "valid", "test"),
    check: bool = True,
    extra: Sequence[str] = (),
    languages: Sequence[str] = ("src", "tgt"),
) -> subprocess.CompletedProcess:
    """fairseq-preprocess of ``raw/{split}.{src,tgt}`` (or the two ``languages``) with a joined dictionary."""
    prefixes = [arg for split in splits for arg in (f"--{split}pref", str(raw / split))]
    return run(
        "fairseq-preprocess",
        [
            "--user-dir",
            "user_dir",
            "--source-lang",
            languages[0],
            "--target-lang",
            languages[1],
            "--joined-dictionary",
            "--workers",
            "1",
            *prefixes,
            "--destdir",
            str(destdir),
            *extra,
        ],
        check=check,
    )
