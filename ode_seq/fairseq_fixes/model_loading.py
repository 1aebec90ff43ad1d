"""Refuse models for generation whose results would be silently wrong: non-finite parameters, data
other than the model was trained with (dictionaries, subword model, translation direction), options
other than its parameters were trained with."""

from __future__ import annotations

import functools
import inspect
import os
from typing import Any, Callable, Optional

from fairseq import checkpoint_utils
from fairseq.data import data_utils
from fairseq.tasks import TASK_REGISTRY

from ode_seq.checkpoint_files import check_finite_parameters
from ode_seq.training_data.record import (
    DataMismatchError,
    LanguagePair,
    language_pair,
    reversed_direction,
)
from ode_seq.training_data.recording_task import RecordsTrainingData
from ode_seq.training_data.subword_models import CHECKED_KINDS

from .fix import FairseqFix

# The subword model options of fairseq's BPE configurations (given to the hub interface as overrides).
SUBWORD_MODEL_OPTIONS = ("sentencepiece_model", "bpe_codes")
RECORDING_TASKS = ("translation", "language_modeling")


def trained_pair(task, trained_task_cfg: Any) -> Optional[LanguagePair]:
    """The pair a checkpoint translates: recorded by the task, given at training, or inferred
    from the training data directory as fairseq did when training (None if unknown)."""
    record = getattr(task, "loaded_record", None)
    recorded = (record.language_pair if record else None) or language_pair(trained_task_cfg)
    if recorded:
        return recorded
    data = (getattr(trained_task_cfg, "data", None) or "").split(os.pathsep)[0]
    if data and os.path.isdir(data):
        inferred = tuple(data_utils.infer_language_pair(data))
        return inferred if all(inferred) else None
    return None


def check_direction(path: str, trained: Optional[LanguagePair], task) -> None:
    """DataMismatchError when ``task`` translates in the opposite direction of checkpoint ``path``."""
    mismatch = reversed_direction(trained, task)
    if mismatch:
        raise mismatch.naming(path)


def checked_ensemble_loader(load: Callable) -> Callable:
    """fairseq's ``load_model_ensemble_and_task``, loading one file after the other into one task,
    that refuses a model with non-finite parameters, a given task whose dictionaries are not the
    checkpoint's or whose direction is its reverse, a model built with other options than its
    checkpoint records where the overrides do not allow it, and a subword model given as an
    override (the hub interface) that does not match the dictionaries; errors name the file."""
    signature = inspect.signature(load)

    @functools.wraps(load)
    def checked(*args, **kwargs):
        given = signature.bind(*args, **kwargs)
        given.apply_defaults()
        arguments = dict(given.arguments)
        filenames, task, ensemble, cfg = list(arguments.pop("filenames")), arguments.pop("task"), [], None
        overrides = dict(arguments.get("arg_overrides") or {})
        for path in filenames:
            if isinstance(task, RecordsTrainingData):
                task.loaded_record = None
            try:
                models, cfg, task = load([path], task=task, **arguments)
            except DataMismatchError as error:
                raise error.naming(path) from None
            check_finite_parameters(path, models[0].state_dict())
            if isinstance(task, RecordsTrainingData):
                task.check_loaded_model(path, overrides)
            if given.arguments["task"] is not None:
                check_direction(path, trained_pair(task, cfg.task), task)
            ensemble.extend(models)
        given_subwords = any(option in overrides for option in SUBWORD_MODEL_OPTIONS)
        if given_subwords and getattr(cfg.bpe, "_name", None) in CHECKED_KINDS:
            task.build_bpe(cfg.bpe)
        return ensemble, cfg, task

    return checked


class ModelLoading(FairseqFix):
    """fairseq loads a model whose parameters hold inf or nan (a run that diverged) without a
    word: ``--score-reference`` prints nan scores and exits 0, generation stops at an unrelated
    assertion. fairseq-generate/-interactive with ``-s tgt -t src`` run a src -> tgt model on
    target-language input: with a joined dictionary nothing fails and the output is garbage. A data
    directory (or hub ``data_name_or_path``, or export ``--data``) whose dictionaries have the
    model's size but other symbols scores and translates other words; a subword model that did not
    encode the training data cuts sentences into pieces the model never saw. ``--model-overrides``
    (or an edited checkpoint configuration) that changes an option whose parameters fit, such as
    the field form or the activation, runs the parameters as a function they were never trained for.
    The fix: the ``translation`` and ``language_modeling`` tasks record their language pair,
    dictionaries, run and the options of the model they built in the checkpoints they save
    (:mod:`ode_seq.training_data.record`, :mod:`ode_seq.training_data.model_options`), and
    ``load_model_ensemble_and_task`` refuses all of the above, naming the file, what differs and
    what to do (older checkpoints: the pair given at training, or inferred from their data
    directory as fairseq did; their dictionaries and options are not checked, which is logged)."""

    name = "model_loading"
    patches = (
        "fairseq.tasks.TASK_REGISTRY['translation']",
        "fairseq.tasks.TASK_REGISTRY['language_modeling']",
        "fairseq.checkpoint_utils.load_model_ensemble_and_task",
    )

    def apply(self) -> None:
        for name in RECORDING_TASKS:
            base = TASK_REGISTRY[name]
            TASK_REGISTRY[name] = type(
                base.__name__, (RecordsTrainingData, base), {"__module__": __name__, "__doc__": base.__doc__}
            )
        checkpoint_utils.load_model_ensemble_and_task = checked_ensemble_loader(
            checkpoint_utils.load_model_ensemble_and_task
        )
