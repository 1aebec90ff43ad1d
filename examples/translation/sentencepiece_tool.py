#!/usr/bin/env python3
"""Joint SentencePiece subwords for the translation recipes (the pip wheel ships no spm_* tools).

    sentencepiece_tool.py train --model-prefix P --vocab-size N FILE...
    sentencepiece_tool.py encode --model P.model < text > pieces

`train` learns one unigram model on the concatenation of FILE... (source and target together, so
one joined dictionary covers both sides); the vocabulary size is a soft limit so that small
slices still train. `encode` writes space-separated pieces; fairseq's `--remove-bpe sentencepiece`
undoes it. `train` writes to a temporary name and renames on success; `encode` streams to stdout.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path
from typing import Sequence

import sentencepiece as spm

from ode_seq.text_files import TextInputError, iter_lines


def train(model_prefix: Path, vocab_size: int, inputs: Sequence[Path], threads: int) -> None:
    """Train a unigram model with full character coverage; writes PREFIX.model and PREFIX.vocab."""
    missing = [str(p) for p in inputs if not p.is_file()]
    if missing:
        sys.exit(f"error: sentencepiece training input missing: {', '.join(missing)}")
    model_prefix.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=model_prefix.parent) as tmp:
        tmp_prefix = Path(tmp) / model_prefix.name
        spm.SentencePieceTrainer.train(
            input=",".join(map(str, inputs)),
            model_prefix=str(tmp_prefix),
            vocab_size=vocab_size,
            model_type="unigram",
            character_coverage=1.0,
            hard_vocab_limit=False,
            num_threads=threads,
            input_sentence_size=2_000_000,
            shuffle_input_sentence=True,
            minloglevel=1,
        )
        for suffix in (".vocab", ".model"):
            os.replace(f"{tmp_prefix}{suffix}", f"{model_prefix}{suffix}")


def encode(model: Path) -> None:
    """Encode stdin line by line (read by `ode_seq.text_files`) into space-separated pieces on stdout."""
    if not model.is_file():
        sys.exit(f"error: sentencepiece model {model} not found; run the `train` stage first")
    processor = spm.SentencePieceProcessor(model_file=str(model))
    try:
        for line in iter_lines(sys.stdin.buffer, "standard input"):
            sys.stdout.write(" ".join(processor.encode(line, out_type=str)) + "\n")
    except TextInputError as error:
        sys.exit(f"error: {error}")


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    train_parser = commands.add_parser("train")
    train_parser.add_argument("--model-prefix", type=Path, required=True)
    train_parser.add_argument("--vocab-size", type=int, required=True)
    train_parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    train_parser.add_argument("inputs", type=Path, nargs="+")
    encode_parser = commands.add_parser("encode")
    encode_parser.add_argument("--model", type=Path, required=True)
    args = parser.parse_args(argv)
    if args.command == "train":
        train(args.model_prefix, args.vocab_size, args.inputs, args.threads)
    else:
        encode(args.model)


if __name__ == "__main__":
    main()
