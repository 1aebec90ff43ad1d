"""Refuse to resume or fine-tune a model on data binarised with other dictionaries, and to resume
it as a model with other options."""

from __future__ import annotations

import functools
import os
import pickle
from typing import Any, Callable, Dict, Optional

import torch
from fairseq.trainer import Trainer

from ode_seq.checkpoint_files import allow_fairseq_checkpoint_types
from ode_seq.training_data.record import read_record
from ode_seq.training_data.recording_task import RecordsTrainingData

from .fix import FairseqFix


def task_state(path: str) -> Optional[Dict[str, Any]]:
    """The ``task_state`` of checkpoint ``path``, read under safe loading with its tensors mapped,
    not read; None when the file cannot be read so (fairseq's load that follows names the problem)."""
    allow_fairseq_checkpoint_types()
    try:
        state = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except (RuntimeError, pickle.UnpicklingError, ValueError, OSError):
        return None
    return state.get("task_state") if isinstance(state, dict) else None


def checking_training_data(load_checkpoint: Callable) -> Callable:
    """fairseq's ``Trainer.load_checkpoint`` that first compares the checkpoint's record with the
    data the trainer's task reads (:meth:`RecordsTrainingData.continue_from`)."""

    @functools.wraps(load_checkpoint)
    def load(self: Trainer, filename: str, *args, **kwargs):
        if isinstance(self.task, RecordsTrainingData) and os.path.isfile(filename):
            state = task_state(filename)
            if state is not None:
                fine_tuning = filename == self.cfg.checkpoint.finetune_from_model
                self.task.continue_from(filename, read_record(state), fine_tuning)
        return load_checkpoint(self, filename, *args, **kwargs)

    return load


class ResumedData(FairseqFix):
    """fairseq-train resuming (``--restore-file``, ``checkpoint_last.pt``) or fine-tuning
    (``--finetune-from-model``) a checkpoint on data binarised with another dictionary of the same
    size trains on without a word, every embedding row now standing for another symbol; of another
    size it fails with "Cannot load model parameters … ensure that the architectures match".
    Resuming with ``-s tgt -t src`` trains a src -> tgt model the other way round. Resuming with
    another ``--decoder-ode-method`` (or any option whose parameters fit) trains the run on as
    another model and overwrites its checkpoints. The fix: before the checkpoint is loaded, its
    record (:mod:`ode_seq.training_data.record`) is compared with the trainer's task and the model
    it built, and a difference is refused naming the file, the first differing symbol or the
    options with both values, and the fix (options named by ``--allow-changed-options`` may
    differ; fine-tuning may change any, which is logged); a resume carries on the checkpoint's run
    id, fine-tuning records the run it started from."""

    name = "resumed_data"
    patches = ("fairseq.trainer.Trainer.load_checkpoint",)

    def apply(self) -> None:
        Trainer.load_checkpoint = checking_training_data(Trainer.load_checkpoint)
