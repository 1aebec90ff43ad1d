"""Refuse models for generation whose results would be silently wrong: non-finite parameters, or a
translation direction opposite to the one the model was trained for."""

from __future__ import annotations

import functools
import inspect
import os
from typing import Any, Callable, Dict, Optional, Tuple

from fairseq import checkpoint_utils
from fairseq.data import data_utils
from fairseq.tasks.translation import TranslationTask

from ode_seq.checkpoint_files import check_finite_parameters

from .fix import FairseqFix

LanguagePair = Tuple[str, str]
PAIR_KEY = "language_pair"


def language_pair(task_cfg: Any) -> Optional[LanguagePair]:
    source, target = getattr(task_cfg, "source_lang", None), getattr(task_cfg, "target_lang", None)
    return (source, target) if source and target else None


def recording_language_pair(state_dict: Callable) -> Callable:
    """A task's ``state_dict`` (saved in checkpoints as ``task_state``) that adds the language pair
    the task translates."""

    @functools.wraps(state_dict)
    def recorded(self) -> Dict[str, Any]:
        return {**state_dict(self), PAIR_KEY: list(language_pair(self.cfg) or ())}

    return recorded


def reading_language_pair(load_state_dict: Callable) -> Callable:
    """A task's ``load_state_dict`` that keeps a checkpoint's recorded pair as
    ``trained_language_pair`` (None if it has none) and passes the rest on."""

    @functools.wraps(load_state_dict)
    def load(self, state_dict: Dict[str, Any]) -> None:
        state = dict(state_dict)
        pair = state.pop(PAIR_KEY, None)
        self.trained_language_pair = tuple(pair) if pair else None
        load_state_dict(self, state)

    return load


def trained_pair(task, trained_task_cfg: Any) -> Optional[LanguagePair]:
    """The pair a checkpoint translates: recorded by the task, given at training, or inferred
    from the training data directory as fairseq did when training (None if unknown)."""
    recorded = getattr(task, "trained_language_pair", None) or language_pair(trained_task_cfg)
    if recorded:
        return recorded
    data = (getattr(trained_task_cfg, "data", None) or "").split(os.pathsep)[0]
    if data and os.path.isdir(data):
        inferred = tuple(data_utils.infer_language_pair(data))
        return inferred if all(inferred) else None
    return None


def check_direction(path: str, trained: Optional[LanguagePair], task) -> None:
    """ValueError when ``task`` translates in the opposite direction of checkpoint ``path``."""
    asked = language_pair(getattr(task, "cfg", None))
    if trained is None or asked is None or trained[0] == trained[1] or asked != trained[::-1]:
        return
    raise ValueError(
        f"{path} was trained to translate {trained[0]} -> {trained[1]}, but this run reads "
        f"{asked[0]} as the source and {asked[1]} as the target (-s/--source-lang {asked[0]} "
        f"-t/--target-lang {asked[1]}), so the model would get sentences of the wrong language: "
        f"pass -s {trained[0]} -t {trained[1]}, or a checkpoint trained for {asked[0]} -> {asked[1]}"
    )


def checked_ensemble_loader(load: Callable) -> Callable:
    """fairseq's ``load_model_ensemble_and_task`` that refuses a model with non-finite parameters
    and a given task whose direction is the reverse of the checkpoint's."""
    signature = inspect.signature(load)

    @functools.wraps(load)
    def checked(*args, **kwargs):
        given = signature.bind(*args, **kwargs).arguments
        ensemble, cfg, task = load(*args, **kwargs)
        filenames = list(given["filenames"])
        for path, model in zip(filenames, ensemble):
            check_finite_parameters(path, model.state_dict())
        if given.get("task") is not None:
            check_direction(filenames[-1], trained_pair(task, cfg.task), task)
        return ensemble, cfg, task

    return checked


class ModelLoading(FairseqFix):
    """fairseq loads a model whose parameters hold inf or nan (a run that diverged) without a
    word: ``--score-reference`` prints nan scores and exits 0, generation stops at an unrelated
    assertion. fairseq-generate/-interactive with ``-s tgt -t src`` run a src -> tgt model on
    target-language input: with a joined dictionary nothing fails and the output is garbage.
    The fix: ``load_model_ensemble_and_task`` refuses both, naming the file and what to do;
    fairseq's TranslationTask records its language pair in the checkpoints it trains (older checkpoints:
    the pair given at training, or inferred from their data directory as fairseq did)."""

    name = "model_loading"
    patches = (
        "fairseq.tasks.translation.TranslationTask.state_dict",
        "fairseq.tasks.translation.TranslationTask.load_state_dict",
        "fairseq.checkpoint_utils.load_model_ensemble_and_task",
    )

    def apply(self) -> None:
        TranslationTask.state_dict = recording_language_pair(TranslationTask.state_dict)
        TranslationTask.load_state_dict = reading_language_pair(TranslationTask.load_state_dict)
        checkpoint_utils.load_model_ensemble_and_task = checked_ensemble_loader(
            checkpoint_utils.load_model_ensemble_and_task
        )
