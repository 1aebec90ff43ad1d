"""Subword models (SentencePiece, subword-nmt BPE) checked against a model's dictionaries.

Every symbol of a dictionary built from subword-encoded text is a unit the subword model produces:
a SentencePiece piece, or a subword-nmt unit (a single character or the result of one of its
merges; ``xy@@`` is the unit ``xy`` inside a word, ``xy`` the unit ``xy</w>`` at its end). A
symbol it cannot produce means the subword model is not the one that encoded the training data:
sentences would be cut into pieces the model never saw. fairseq's special symbols, symbols in
angle brackets or double underscores (language tags such as ``<2en>``, ``__en__``) and padding
words (``madeupword0000``) are not checked. Other subword models (GPT-2 byte BPE, …) are not.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Optional, Tuple

from .record import SIDES, DataMismatchError, dictionary_file, language_pair, side_name, task_options

NOT_SUBWORDS = re.compile(r"<.*>|__.*__|madeupword\d+")
CHECKED_KINDS = ("sentencepiece", "subword_nmt")  # fairseq's --bpe names of the models checked


@dataclass(frozen=True)
class SubwordModel:
    """A subword model as named on the command line (option and file) and what it produces."""

    name: str
    produces: Callable[[str], bool]
    units: str  # what it produces, in words


def sentencepiece_model(name: str, processor: Any) -> SubwordModel:
    """A ``sentencepiece.SentencePieceProcessor``: its pieces."""
    pieces = {processor.id_to_piece(i) for i in range(processor.get_piece_size())}
    return SubwordModel(name, pieces.__contains__, "pieces of that model")


def sentencepiece_file(name: str, path: str) -> SubwordModel:
    import sentencepiece

    return sentencepiece_model(name, sentencepiece.SentencePieceProcessor(model_file=path))


def subword_nmt_codes(name: str, codes: Iterable[Tuple[str, str]], separator: str) -> SubwordModel:
    """subword-nmt merges ``codes`` ((left, right) pairs): single characters and merge results."""
    merged = {left + right for left, right in codes}

    def produces(symbol: str) -> bool:
        inside = symbol.endswith(separator)
        core = symbol[: -len(separator)] if inside else symbol
        return len(core) == 1 or (core if inside else f"{core}</w>") in merged

    return SubwordModel(name, produces, "units its merges produce")


def fairseq_subword_model(bpe: Any, cfg: Any) -> Optional[SubwordModel]:
    """What fairseq's ``bpe`` (built from ``cfg``) produces; None for kinds not checked."""
    kind = type(bpe).__name__
    if kind == "SentencepieceBPE":
        return sentencepiece_model(f"--sentencepiece-model {cfg.sentencepiece_model}", bpe.sp)
    if kind == "SubwordNMTBPE":
        return subword_nmt_codes(f"--bpe-codes {cfg.bpe_codes}", bpe.bpe.bpe_codes, bpe.bpe.separator)
    return None


def check_subword_model(model: Optional[SubwordModel], task: Any) -> None:
    """DataMismatchError naming the subword model, the dictionary and its first symbol the model
    cannot produce, when there is one (``model`` None: nothing to check)."""
    if model is None:
        return
    checked = set()
    for side in SIDES:
        dictionary = getattr(task, f"{side}_dictionary", None)
        if dictionary is None or tuple(dictionary.symbols) in checked:
            continue
        checked.add(tuple(dictionary.symbols))
        foreign = [
            (index, symbol)
            for index, symbol in enumerate(dictionary.symbols)
            if index >= dictionary.nspecial and not NOT_SUBWORDS.fullmatch(symbol) and not model.produces(symbol)
        ]
        if foreign:
            index, symbol = foreign[0]
            name = side_name(side, language_pair(task_options(task)))
            raise DataMismatchError(
                model.name,
                f"does not match the model's {name} dictionary {dictionary_file(task, side)}: {len(foreign)} of its "
                f"{len(dictionary) - dictionary.nspecial} symbols are not {model.units}, the first is symbol {index} "
                f"{symbol!r}; sentences would be cut into subwords the model never saw: give the subword model "
                "that encoded the model's training data",
            )
