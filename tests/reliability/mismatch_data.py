"""Inputs for the data-mismatch tests: checkpoints saved in this process by fairseq's Trainer (with
the plugin loaded, so they record their training data), data directories whose dictionaries
differ from them, and subword models that did not encode their data."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Callable, List, Sequence

import torch
from fairseq import tasks
from fairseq.data import Dictionary
from fairseq.trainer import Trainer

from testkit.in_process import parse_training_args
from tests.e2e.cli import TINY_MODEL
from tests.e2e.corpus import write_reversal_corpus
from tests.fixtures.make_fixtures import ADAM_ON_CPU

TRANSLATION = ["--task", "translation", "--source-lang", "src", "--target-lang", "tgt", "--criterion", "cross_entropy"]
# fairseq's pre-norm Transformer with one embedding matrix (exportable to every target).
TRANSFORMER = [
    "--arch",
    "transformer",
    *TINY_MODEL,
    "--share-all-embeddings",
    "--encoder-normalize-before",
    "--decoder-normalize-before",
]
RK4 = ["--arch", "ode_transformer_rk4", *TINY_MODEL]
LANGUAGE_MODEL = [
    "--task",
    "language_modeling",
    "--arch",
    "transformer_lm",
    "--decoder-embed-dim",
    "32",
    "--decoder-ffn-embed-dim",
    "64",
    "--decoder-attention-heads",
    "2",
    "--decoder-layers",
    "1",
    "--tokens-per-sample",
    "32",
    "--criterion",
    "cross_entropy",
]


def trainer(data: Path, argv: Sequence[str], seed: int = 1) -> Trainer:
    """fairseq-train's Trainer for ``data`` and ``argv``, its model at its initial values."""
    cfg = parse_training_args(
        [
            str(data),
            *argv,
            *ADAM_ON_CPU,
            "--seed",
            str(seed),
            "--no-save-optimizer-state",
        ]
    )
    task = tasks.setup_task(cfg.task)
    torch.manual_seed(seed)
    model = task.build_model(cfg.model)
    return Trainer(cfg, task, model, task.build_criterion(cfg.criterion))


def save(data: Path, path: Path, argv: Sequence[str], seed: int = 1) -> Path:
    """A checkpoint of an untrained model, written as fairseq-train writes one."""
    trainer(data, argv, seed).save_checkpoint(str(path), {})
    return path


def with_dictionaries(data: Path, destination: Path, change: Callable[[List[str]], List[str]]) -> Path:
    """A copy of data directory ``data`` whose dictionary files have their lines changed by ``change``."""
    shutil.copytree(data, destination)
    for dictionary in destination.glob("dict*.txt"):
        dictionary.write_text("".join(change(dictionary.read_text().splitlines(keepends=True))))
    return destination


def swap_two_symbols(lines: List[str]) -> List[str]:
    """Lines 2 and 3 (symbols 6 and 7) swapped: the same size and the same symbols, in another order."""
    return [*lines[:2], lines[3], lines[2], *lines[4:]]


def three_more_symbols(lines: List[str]) -> List[str]:
    return [*lines, "extra1 1\n", "extra2 1\n", "extra3 1\n"]


def separate_dictionaries(data: Path, destination: Path) -> Path:
    """A copy of ``data`` whose target dictionary lists the symbols in reverse order (so source and
    target dictionaries differ)."""
    shutil.copytree(data, destination)
    target = destination / "dict.tgt.txt"
    target.write_text("".join(reversed(target.read_text().splitlines(keepends=True))))
    return destination


def renamed_languages(data: Path, destination: Path, source: str, target: str) -> Path:
    """Only the dictionaries of ``data``, as those of the pair ``source``-``target``."""
    destination.mkdir()
    shutil.copy(data / "dict.src.txt", destination / f"dict.{source}.txt")
    shutil.copy(data / "dict.tgt.txt", destination / f"dict.{target}.txt")
    return destination


def other_corpus(directory: Path) -> Path:
    """The reversal corpus with every 'w' written 'v': other words, so other subword units."""
    directory.mkdir()
    write_reversal_corpus(directory)
    for text in directory.glob("*.src"):
        text.write_text(text.read_text().replace("w", "v"))
    return directory / "train.src"


def train_sentencepiece(text: Path, prefix: Path) -> Path:
    import sentencepiece

    sentencepiece.SentencePieceTrainer.train(
        input=str(text),
        model_prefix=str(prefix),
        vocab_size=30,
        model_type="bpe",
        hard_vocab_limit=False,
        num_threads=1,
    )
    return prefix.with_suffix(".model")


def learn_subword_nmt(text: Path, codes: Path) -> Path:
    from subword_nmt.learn_bpe import learn_bpe

    with open(text, encoding="utf-8") as infile, open(codes, "w", encoding="utf-8") as outfile:
        learn_bpe(infile, outfile, 20)
    return codes


def encoded_dictionaries(raw: Path, destination: Path, encode: Callable[[str], str]) -> Path:
    """A data directory holding the joined dictionary of ``raw``'s training corpus with every line
    encoded, as fairseq-preprocess --joined-dictionary writes it (what loading a model reads)."""
    dictionary = Dictionary()
    for side in ("src", "tgt"):
        for line in (raw / f"train.{side}").read_text().splitlines():
            for token in encode(line).split():
                dictionary.add_symbol(token)
    dictionary.finalize(padding_factor=8)
    destination.mkdir()
    for side in ("src", "tgt"):
        dictionary.save(str(destination / f"dict.{side}.txt"))
    return destination


def language_model_data(data: Path, destination: Path) -> Path:
    """The source side of translation data directory ``data`` as language-modelling data."""
    destination.mkdir()
    shutil.copy(data / "dict.src.txt", destination / "dict.txt")
    for suffix in ("bin", "idx"):
        shutil.copy(data / f"valid.src-tgt.src.{suffix}", destination / f"valid.{suffix}")
    return destination


def sentencepiece_encoder(model: Path) -> Callable[[str], str]:
    import sentencepiece

    processor = sentencepiece.SentencePieceProcessor(model_file=str(model))
    return lambda line: " ".join(processor.encode(line, out_type=str))


def subword_nmt_encoder(codes: Path) -> Callable[[str], str]:
    from subword_nmt.apply_bpe import BPE

    with open(codes, encoding="utf-8") as f:
        bpe = BPE(f)
    return bpe.process_line
