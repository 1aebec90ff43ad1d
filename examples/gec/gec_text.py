"""Text helpers shared by the GEC preparation scripts: line files written atomically, and the
NLTK word tokenisation the CoNLL-2014 M2 files use.

Tokenisation: Punkt sentence splitting (untrained, with common English abbreviations, so it needs
no downloaded model) then NLTK's Treebank-style ``word_tokenize`` per sentence, e.g.
``He said, "We shouldn't go."`` -> ``He said , " We should n't go . "``. Treebank turns double
quotes into `````` and ``''``; those are mapped back to ``"`` unless ``treebank_quotes`` is set,
as in the M2 scorer's documentation example.
"""

from __future__ import annotations

import os
from typing import Iterable, List, Sequence

ABBREVIATIONS = {
    "mr",
    "mrs",
    "ms",
    "dr",
    "prof",
    "sr",
    "jr",
    "st",
    "vs",
    "etc",
    "e.g",
    "i.e",
    "no",
    "fig",
    "inc",
    "ltd",
    "co",
    "jan",
    "feb",
    "mar",
    "apr",
    "jun",
    "jul",
    "aug",
    "sep",
    "sept",
    "oct",
    "nov",
    "dec",
    "u.s",
    "u.k",
}


def write_lines(path: str, lines: Iterable[str]) -> int:
    """Write lines to ``path.partial`` and rename it to ``path`` when complete; returns the count."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    partial = path + ".partial"
    count = 0
    with open(partial, "w", encoding="utf-8") as handle:
        for line in lines:
            handle.write(line + "\n")
            count += 1
    os.replace(partial, path)
    return count


class NltkTokenizer:
    """CoNLL-style English word tokenisation (see the module docstring)."""

    def __init__(self, treebank_quotes: bool = False):
        from nltk.tokenize.punkt import PunktParameters, PunktSentenceTokenizer

        parameters = PunktParameters()
        parameters.abbrev_types = set(ABBREVIATIONS)
        self._sentences = PunktSentenceTokenizer(parameters)
        self._treebank_quotes = treebank_quotes

    def __call__(self, text: str) -> List[str]:
        from nltk.tokenize import word_tokenize

        tokens = [
            token
            for sentence in self._sentences.tokenize(text)
            for token in word_tokenize(sentence, preserve_line=True)
        ]
        if self._treebank_quotes:
            return tokens
        return ['"' if token in ("``", "''") else token for token in tokens]


def tokenize_lines(lines: Sequence[str], treebank_quotes: bool = False) -> List[str]:
    """Each line tokenised and re-joined with single spaces."""
    tokenizer = NltkTokenizer(treebank_quotes)
    return [" ".join(tokenizer(line)) for line in lines]
