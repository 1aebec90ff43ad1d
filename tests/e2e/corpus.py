"""A tiny reversal corpus (the target is the source read backwards), a tiny text corpus for language
models, and their binarisation, shared by the tests that run fairseq's command-line tools."""

from __future__ import annotations

import random
import subprocess
from pathlib import Path
from typing import Dict, List, Sequence

from testkit.in_process import run_in_process

WORDS = [f"w{i}" for i in range(24)]
SIZES = {"train": 400, "valid": 20, "test": 20}
CLI_SIZES = {"train": 400, "valid": 30, "test": 25}  # the end-to-end tests of the tools
LM_SIZES = {"train": 300, "valid": 20, "test": 20}
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
    return fairseq_preprocess(
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
        check,
    )


def reversal_data_bin(raw: Path, sizes: Dict[str, int] = SIZES) -> Path:
    """The reversal corpus of ``sizes`` written in ``raw`` and binarised into ``raw/bin`` (returned)."""
    write_reversal_corpus(raw, sizes)
    preprocess(raw, raw / "bin", splits=tuple(sizes))
    return raw / "bin"


def write_lm_corpus(directory: Path, sizes: Dict[str, int] = LM_SIZES, seed: int = 0) -> None:
    """``{split}.txt``: lines of 3–12 words, each word followed by its successor with probability
    ½ (something for a model to learn)."""
    rng = random.Random(seed)
    for split, n in sizes.items():
        lines = []
        for _ in range(n):
            words = [rng.randrange(len(WORDS))]
            for _ in range(rng.randint(2, 11)):
                words.append((words[-1] + 1) % len(WORDS) if rng.random() < 0.5 else rng.randrange(len(WORDS)))
            lines.append(" ".join(WORDS[w] for w in words))
        (directory / f"{split}.txt").write_text("".join(line + "\n" for line in lines))


def preprocess_lm(raw: Path, destdir: Path) -> None:
    """fairseq-preprocess --only-source of ``raw/{split}.txt`` for the splits of :data:`LM_SIZES`."""
    prefixes = [arg for split in LM_SIZES for arg in (f"--{split}pref", str(raw / f"{split}.txt"))]
    fairseq_preprocess(["--only-source", *prefixes, "--destdir", str(destdir), "--workers", "1"], check=True)


def lm_data_bin(raw: Path) -> Path:
    """The language-model corpus written in ``raw`` and binarised (--only-source) into ``raw/bin`` (returned)."""
    write_lm_corpus(raw)
    preprocess_lm(raw, raw / "bin")
    return raw / "bin"


def fairseq_preprocess(args: List[str], check: bool) -> subprocess.CompletedProcess:
    """fairseq-preprocess's entry point in this process, without a subprocess's seconds of start-up
    (these corpora take a fraction of a second to binarise); ``check``: a failure raises."""
    return run_in_process("fairseq-preprocess", args, check=check)
