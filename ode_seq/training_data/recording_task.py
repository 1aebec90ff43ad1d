"""The fairseq task mixin that records the training data and the model's options in every
checkpoint a task saves and checks them for every checkpoint it loads (:mod:`.record`,
:mod:`.model_options`)."""

from __future__ import annotations

import logging
from typing import Any, Dict, Mapping, Optional

from .model_options import (
    ALLOW_OPTION,
    check_known,
    fine_tuning_note,
    load_mismatch,
    model_options,
    option_names,
    resume_mismatch,
    takes_allowance,
)
from .record import (
    TrainingRecord,
    dictionary_mismatch,
    new_run_id,
    note_missing_record,
    read_record,
    reversed_direction,
)
from .subword_models import check_subword_model, fairseq_subword_model

logger = logging.getLogger(__name__)


class RecordsTrainingData:
    """Mixin for fairseq tasks: the checkpoints they save record the training data and the options
    of the model the task built (:class:`TrainingRecord`), and a checkpoint loaded for generation,
    scoring or export is refused when this task's dictionaries are not those it was trained with
    (:class:`DataMismatchError`, naming "the checkpoint"; the loader names the file) or when the model
    built from it computes with other options (:meth:`check_loaded_model`)."""

    loaded_record: Optional[TrainingRecord] = None  # of the checkpoint loaded last
    run_id: Optional[str] = None
    started_from: Optional[str] = None
    model_options: Optional[Dict[str, Any]] = None  # of the model built last
    allowance: Optional[str] = None  # its --allow-changed-options, if the model takes the flag

    def build_model(self, cfg: Any, from_checkpoint: bool = False) -> Any:
        model = super().build_model(cfg, from_checkpoint)
        self.model_options = model_options(model, cfg)
        self.allowance = (getattr(cfg, ALLOW_OPTION, None) or "") if takes_allowance(type(model)) else None
        return model

    def state_dict(self) -> Dict[str, Any]:
        if self.run_id is None:
            self.run_id = new_run_id()
        return {**super().state_dict(), **TrainingRecord.of(self).state()}

    def load_state_dict(self, state_dict: Dict[str, Any]) -> None:
        state = dict(state_dict)
        self.loaded_record = TrainingRecord.pop(state)
        mismatch = dictionary_mismatch(self.loaded_record, self)
        if mismatch:
            raise mismatch
        super().load_state_dict(state)

    def continue_from(self, path: str, record: TrainingRecord, fine_tuning: bool) -> None:
        """Training goes on from checkpoint ``path``: refuse other dictionaries and, when resuming,
        the reverse direction and model options other than recorded that ``--allow-changed-options``
        does not name; a resume continues the checkpoint's run, fine-tuning starts a new run that
        records where it started (other options are logged)."""
        note_missing_record(path, record)
        problems = [dictionary_mismatch(record, self)]
        if not fine_tuning:
            problems.append(reversed_direction(record.language_pair, self))
        for problem in problems:
            if problem:
                raise problem.naming(path)
        if fine_tuning:
            self.started_from = record.run_id
            if reversed_direction(record.language_pair, self):
                trained = " -> ".join(record.language_pair)
                logger.warning(f"fine-tuning {path}, trained for {trained}, the other way round")
            note = fine_tuning_note(path, record.model_options, self.model_options or {})
            if note:
                logger.warning(note)
        else:
            self.check_resumed_options(path, record)
            self.run_id, self.started_from = record.run_id or self.run_id, record.started_from

    def check_resumed_options(self, path: str, record: TrainingRecord) -> None:
        """Refuse to resume ``path`` as a model with options other than recorded, unless
        ``--allow-changed-options`` names them."""
        if self.model_options is None:
            return
        allowed = option_names(self.allowance)
        check_known(allowed, self.model_options, "--allow-changed-options")
        mismatch = resume_mismatch(path, record.model_options, self.model_options, allowed, self.allowance is not None)
        if mismatch:
            raise mismatch

    def check_loaded_model(self, path: str, overrides: Mapping[str, Any]) -> None:
        """After checkpoint ``path`` was loaded into the model built last with ``overrides``
        (``--model-overrides``): note a checkpoint without a record, refuse options other than
        recorded that the overrides do not allow."""
        record = self.loaded_record or read_record({})
        note_missing_record(path, record)
        mismatch = load_mismatch(path, record.model_options, self.model_options or {}, overrides)
        if mismatch:
            raise mismatch

    def build_bpe(self, args: Any) -> Any:
        """fairseq's subword model, refused when the dictionaries hold symbols it cannot produce."""
        bpe = super().build_bpe(args)
        check_subword_model(fairseq_subword_model(bpe, args) if bpe is not None else None, self)
        return bpe
