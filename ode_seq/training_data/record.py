"""What a checkpoint records about the data its model was trained with, and the checks against it.

A checkpoint saved by a task with the plugin loaded (fairseq's ``translation`` and
``language_modeling``, :class:`~.recording_task.RecordsTrainingData`) records in its ``task_state``:

- ``language_pair``: [source, target] (translation only);
- ``dictionaries``: per side (``source``, ``target``) the dictionary file it was read from, the
  symbols in index order and their digest ``sha256("\\n".join(symbols))`` (what is compared);
- ``run``: the id of the training run that wrote it (a uuid drawn when a run starts from scratch or
  from ``--finetune-from-model``, kept by every resume) and the run it was fine-tuned from;
- ``model_options``: the options that define the function its parameters compute, as the model
  was built with them (:mod:`.model_options`).

Embedding row i of the model means symbol i of its dictionary, so a dictionary with the same size
but other symbols (or an order of its own) makes every score and translation wrong without an
error; the checks compare symbols, not sizes. A checkpoint without a record (written before) is
loaded as before, with a logged note.
"""

from __future__ import annotations

import hashlib
import logging
import os
import uuid
from dataclasses import dataclass, field
from typing import Any, Dict, Optional, Sequence, Tuple

logger = logging.getLogger(__name__)

LanguagePair = Tuple[str, str]
PAIR_KEY = "language_pair"
DICTIONARIES_KEY = "dictionaries"
RUN_KEY = "run"
MODEL_OPTIONS_KEY = "model_options"
SIDES = ("source", "target")
CHECKPOINT = "the checkpoint"


class DataMismatchError(ValueError):
    """Data given with a model that is not the data it was trained with: ``subject`` (a file, or
    "the checkpoint" until the caller names it) and what differs, with the fix."""

    def __init__(self, subject: str, text: str) -> None:
        self.subject, self.text = subject, text
        super().__init__(f"{subject} {text}")

    def naming(self, path: str) -> "DataMismatchError":
        """The same error with "the checkpoint" replaced by the checkpoint's path."""
        return DataMismatchError(path, self.text) if self.subject == CHECKPOINT else self


def symbols_digest(symbols: Sequence[str]) -> str:
    return hashlib.sha256("\n".join(symbols).encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class DictionaryRecord:
    file: str
    symbols: Tuple[str, ...]
    sha256: str

    @classmethod
    def of(cls, file: str, symbols: Sequence[str]) -> "DictionaryRecord":
        return cls(file, tuple(symbols), symbols_digest(symbols))

    def state(self) -> Dict[str, Any]:
        return {"file": self.file, "symbols": list(self.symbols), "sha256": self.sha256}


@dataclass(frozen=True)
class TrainingRecord:
    language_pair: Optional[LanguagePair]
    dictionaries: Dict[str, DictionaryRecord]  # side -> record; empty when not recorded
    run_id: Optional[str] = None
    started_from: Optional[str] = None
    model_options: Dict[str, Any] = field(default_factory=dict)  # empty when not recorded

    @classmethod
    def of(cls, task: Any) -> "TrainingRecord":
        """What ``task`` (a fairseq task) trains on now, and the options of the model it built."""
        dictionaries = {
            side: DictionaryRecord.of(os.path.abspath(dictionary_file(task, side)), dictionary.symbols)
            for side in SIDES
            if (dictionary := getattr(task, f"{side}_dictionary", None)) is not None
        }
        pair = language_pair(task_options(task))
        return cls(pair, dictionaries, task.run_id, task.started_from, dict(getattr(task, "model_options", None) or {}))

    @classmethod
    def pop(cls, task_state: Dict[str, Any]) -> "TrainingRecord":
        """The record in a checkpoint's ``task_state``, removed from it (fairseq's own task state
        stays); fields the checkpoint did not record are None or empty."""
        pair = task_state.pop(PAIR_KEY, None)
        dictionaries = task_state.pop(DICTIONARIES_KEY, None) or {}
        run = task_state.pop(RUN_KEY, None) or {}
        return cls(
            tuple(pair) if pair else None,
            {side: DictionaryRecord(d["file"], tuple(d["symbols"]), d["sha256"]) for side, d in dictionaries.items()},
            run.get("id"),
            run.get("started_from"),
            dict(task_state.pop(MODEL_OPTIONS_KEY, None) or {}),
        )

    def state(self) -> Dict[str, Any]:
        return {
            PAIR_KEY: list(self.language_pair or ()),
            DICTIONARIES_KEY: {side: record.state() for side, record in self.dictionaries.items()},
            RUN_KEY: {"id": self.run_id, "started_from": self.started_from},
            MODEL_OPTIONS_KEY: dict(self.model_options),
        }


def read_record(task_state: Optional[Dict[str, Any]]) -> TrainingRecord:
    """The record of a checkpoint's ``task_state`` (left as it is)."""
    return TrainingRecord.pop(dict(task_state or {}))


def task_options(task: Any) -> Any:
    """A fairseq task's options: ``cfg``, or ``args`` for legacy tasks (language_modeling)."""
    return getattr(task, "cfg", None) or getattr(task, "args", None)


def language_pair(task_cfg: Any) -> Optional[LanguagePair]:
    source, target = getattr(task_cfg, "source_lang", None), getattr(task_cfg, "target_lang", None)
    return (source, target) if source and target else None


def dictionary_file(task: Any, side: str) -> str:
    """The file fairseq read ``task``'s dictionary of ``side`` from: ``dict.LANG.txt`` of the first
    data directory for translation, ``dict.txt`` otherwise."""
    options = task_options(task)
    data = (getattr(options, "data", None) or "").split(os.pathsep)[0]
    pair = language_pair(options)
    return os.path.join(data, f"dict.{pair[SIDES.index(side)]}.txt" if pair else "dict.txt")


def side_name(side: str, pair: Optional[LanguagePair]) -> str:
    return side if pair else {"source": "input", "target": "output"}[side]


def first_difference(recorded: Sequence[str], recorded_in: str, given: Sequence[str], given_in: str) -> str:
    """Where two symbol lists first differ, e.g. "symbol 7 is 'w3' in the model's dictionary but
    'w4' in dict.src.txt (both 28 symbols, 2 differ)"."""
    index = next((i for i, (a, b) in enumerate(zip(recorded, given)) if a != b), min(len(recorded), len(given)))

    def at(symbols: Sequence[str]) -> str:
        return repr(symbols[index]) if index < len(symbols) else "past its end"

    if len(recorded) == len(given):
        sizes = f"both {len(given)} symbols, {sum(a != b for a, b in zip(recorded, given))} differ"
    else:
        sizes = f"{len(recorded)} symbols in {recorded_in}, {len(given)} in {given_in}"
    return f"symbol {index} is {at(recorded)} in {recorded_in} but {at(given)} in {given_in} ({sizes})"


def preprocess_command(record: TrainingRecord) -> str:
    """fairseq-preprocess's options that binarise data with the recorded dictionaries."""
    source, target = (record.dictionaries.get(side) for side in SIDES)
    if record.language_pair is None or not (source and target):
        return f"fairseq-preprocess --only-source --srcdict {(source or target).file}"
    if source.sha256 == target.sha256:
        return f"fairseq-preprocess --srcdict {source.file} --joined-dictionary"
    return f"fairseq-preprocess --srcdict {source.file} --tgtdict {target.file}"


def dictionary_mismatch(record: TrainingRecord, task: Any) -> Optional[DataMismatchError]:
    """How ``task``'s dictionaries differ from the recorded ones (None when they agree or when
    nothing was recorded)."""
    given = {
        side: dictionary.symbols
        for side in SIDES
        if side in record.dictionaries and (dictionary := getattr(task, f"{side}_dictionary", None)) is not None
    }
    digests = {side: symbols_digest(symbols) for side, symbols in given.items()}
    differing = [side for side in given if digests[side] != record.dictionaries[side].sha256]
    if not differing:
        return None
    trained = {side: r.sha256 for side, r in record.dictionaries.items()}
    if len(given) == 2 and digests["source"] == trained["target"] and digests["target"] == trained["source"]:
        pair = record.language_pair
        return DataMismatchError(
            CHECKPOINT,
            f"was trained with this run's dictionaries the other way round: its source dictionary is "
            f"{dictionary_file(task, 'target')} and its target dictionary {dictionary_file(task, 'source')}; "
            f"pass {f'-s {pair[0]} -t {pair[1]}' if pair else 'the source and target languages swapped'}",
        )
    side = differing[0]
    file = dictionary_file(task, side)
    difference = first_difference(record.dictionaries[side].symbols, "the model's dictionary", given[side], file)
    return DataMismatchError(
        CHECKPOINT,
        f"was trained with another {side_name(side, record.language_pair)} dictionary than {file}: {difference}; "
        f"the model reads token ids as rows of its own dictionary ({record.dictionaries[side].file}), so every "
        "score and translation would be of other words: use the data directory the model was trained with, or "
        f"binarise this data with its dictionaries ({preprocess_command(record)})",
    )


def reversed_direction(trained: Optional[LanguagePair], task: Any) -> Optional[DataMismatchError]:
    """The error when ``task`` translates in the opposite direction of a model trained on ``trained``."""
    asked = language_pair(task_options(task))
    if trained is None or asked is None or trained[0] == trained[1] or asked != trained[::-1]:
        return None
    return DataMismatchError(
        CHECKPOINT,
        f"was trained to translate {trained[0]} -> {trained[1]}, but this run reads "
        f"{asked[0]} as the source and {asked[1]} as the target (-s/--source-lang {asked[0]} "
        f"-t/--target-lang {asked[1]}), so the model would get sentences of the wrong language: "
        f"pass -s {trained[0]} -t {trained[1]}, or a checkpoint trained for {asked[0]} -> {asked[1]}",
    )


def missing_record_note(path: str, record: TrainingRecord) -> Optional[str]:
    """The note for a checkpoint that records no dictionaries or no model options (None when it
    records both)."""
    missing = [
        what
        for what, recorded in (("dictionaries", record.dictionaries), ("model options", record.model_options))
        if not recorded
    ]
    if not missing:
        return None
    unchecked = {"dictionaries": "its data", "model options": "the options of the model built"}
    return (
        f"{path} has no record of the {' or '.join(missing)} it was trained with (it was written before "
        f"ode-seq recorded them): {' and '.join(unchecked[what] for what in missing)} "
        f"{'are' if len(missing) > 1 else 'is'} not checked against it"
    )


def note_missing_record(path: str, record: TrainingRecord) -> None:
    note = missing_record_note(path, record)
    if note:
        logger.info(note)


def record_difference(path: str, record: TrainingRecord, first: str, first_record: TrainingRecord) -> Optional[str]:
    """How the training data of checkpoint ``path`` differs from that of ``first`` (dictionaries,
    language pair, run); None when they agree or one of them records nothing."""
    for side in SIDES:
        ours, theirs = record.dictionaries.get(side), first_record.dictionaries.get(side)
        if ours and theirs and ours.sha256 != theirs.sha256:
            name = side_name(side, record.language_pair)
            difference = first_difference(theirs.symbols, first, ours.symbols, path)
            return f"{path} was trained with another {name} dictionary than {first}: {difference}"
    if record.language_pair and first_record.language_pair and record.language_pair != first_record.language_pair:
        return (
            f"{path} was trained for {' -> '.join(record.language_pair)}, "
            f"{first} for {' -> '.join(first_record.language_pair)}"
        )
    if record.run_id and first_record.run_id and record.run_id != first_record.run_id:
        return (
            f"{path} was written by training run {run_name(record)}, {first} by run {run_name(first_record)}: "
            "parameters of separately trained models do not line up, so their mean is neither model"
        )
    return None


def run_name(record: TrainingRecord) -> str:
    started = f", fine-tuned from run {record.started_from[:8]}" if record.started_from else ""
    return f"{record.run_id[:8]}{started}"


def new_run_id() -> str:
    return uuid.uuid4().hex
