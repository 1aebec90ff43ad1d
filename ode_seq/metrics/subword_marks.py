"""Text still in subword units, refused by every scorer: BLEU, ROUGE, M2 and ERRANT score words.

A hypothesis or reference that still carries the segmentation a model reads scores units, not
words: sacreBLEU of ``▁Los ▁hijos`` or ``Lo@@ s hij@@ os`` counts other n-grams than of
``Los hijos``, and nothing else would say so. The rule, applied to every text input of a scorer
(the lines of a plain file, the hypotheses of fairseq-generate output, the S lines of an M2 file):

* A line is *marked* when it holds U+2581 (``▁``, SentencePiece's word-boundary mark) or a
  whitespace-separated token that ends in ``@@`` after at least one other character
  (subword-nmt's continuation mark: ``@@`` before a space or at the end of the line).
* A file is refused when its marked lines are at least 1 % of its lines, and at least one.

Decoded text has no marked line: fairseq's ``--post-process sentencepiece`` removes every ``▁``,
``--remove-bpe`` (``subword_nmt``) every ``@@ `` and a final ``@@``, and so do ``spm_decode`` and
``sed -r 's/(@@ )|(@@ ?$)//g'``. Real text has none either: ``@`` in e-mail addresses and user
names (``a@b.com``, ``@user``), Moses' ``@-@`` and a diff's lone ``@@`` never end a token with
``@@``, and ``▁``, a block-drawing character, is in 1 % of a file's lines only in text about
drawing. Such a file, or one meant to be scored in units, is scored with ``--allow-subword-marks``.
"""

from __future__ import annotations

import argparse
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence, Union

from ode_seq.text_files import read_lines

SENTENCEPIECE_MARK = "\u2581"
BPE_CONTINUATION = re.compile(r"\S@@(?:\s|$)")
REFUSED_SHARE = 0.01
ALLOW_FLAG = "--allow-subword-marks"
SHOWN_CHARACTERS = 60
DECODE = {
    "sentencepiece": (
        "'\u2581' (SentencePiece's word-boundary mark)",
        "fairseq-generate or fairseq-interactive with --post-process sentencepiece (= --remove-bpe sentencepiece), "
        "or spm_decode --model=SPM.model",
    ),
    "bpe": (
        "a token ending in '@@' (subword-nmt's continuation mark)",
        "fairseq-generate or fairseq-interactive with --remove-bpe (= --post-process subword_nmt), "
        "or sed -r 's/(@@ )|(@@ ?$)//g'",
    ),
}


class SubwordMarksError(ValueError):
    """A text input that still holds subword units; the message names the file, the evidence and the fix."""


@dataclass(frozen=True)
class Marks:
    """Which of a file's lines (indices) hold each mark."""

    lines: int
    sentencepiece: tuple[int, ...]
    bpe: tuple[int, ...]

    @property
    def marked(self) -> list[int]:
        return sorted({*self.sentencepiece, *self.bpe})

    @property
    def refused(self) -> bool:
        """The rule of the module docstring: at least 1 % of the lines marked, and at least one."""
        marked = len(self.marked)
        return marked > 0 and marked >= REFUSED_SHARE * self.lines


def find_marks(lines: Sequence[str]) -> Marks:
    """The lines holding ``▁`` and those holding a token ending in ``@@``."""
    sentencepiece = tuple(i for i, line in enumerate(lines) if SENTENCEPIECE_MARK in line)
    bpe = tuple(i for i, line in enumerate(lines) if BPE_CONTINUATION.search(line))
    return Marks(len(lines), sentencepiece, bpe)


def check_words(
    lines: Sequence[str], name: str, allowed: bool = False, unit: str = "line", first_number: int = 1
) -> None:
    """Refuse ``lines`` (the text of ``name``, e.g. "hypothesis file hyp.txt") when they hold
    subword units by the module's rule, unless ``allowed``; the message numbers them as ``unit``
    ``first_number``, ``first_number + 1``, …"""
    marks = find_marks(lines)
    if allowed or not marks.refused:
        return
    kinds = [kind for kind in DECODE if getattr(marks, kind)]
    evidence = " and ".join(
        f"{len(getattr(marks, kind)):,} of {marks.lines:,} {unit}s hold {DECODE[kind][0]}" for kind in kinds
    )
    first = marks.marked[0]
    shown = lines[first][:SHOWN_CHARACTERS] + ("…" if len(lines[first]) > SHOWN_CHARACTERS else "")
    raise SubwordMarksError(
        f"{name} still holds subword units, not words: {evidence}; the first is {unit} {first + first_number}: "
        f"{shown!r}. A score of subword units is not a score of words. Decode the text first: "
        f"{'; '.join(DECODE[kind][1] for kind in kinds)}. Or pass {ALLOW_FLAG} to score it as it is"
    )


def read_words(path: Union[str, Path], allowed: bool = False) -> list[str]:
    """The lines of the file ``path`` (`ode_seq.text_files`), refused by `check_words` unless ``allowed``."""
    lines = read_lines(path)
    check_words(lines, str(path), allowed)
    return lines


def check_m2_words(sources: Sequence[str], path: str, allowed: bool = False) -> None:
    """`check_words` on the source sentences (S lines, without the 'S ') of the M2 file ``path``."""
    check_words(sources, f"M2 file {path} (its S lines)", allowed, "sentence")


def add_allow_argument(parser: argparse.ArgumentParser) -> None:
    """The scorers' ``--allow-subword-marks``."""
    parser.add_argument(
        ALLOW_FLAG,
        action="store_true",
        help="score text that holds SentencePiece's '\u2581' or subword-nmt's '@@' marks as it is "
        "(refused otherwise: see ode_seq.metrics.subword_marks)",
    )
