"""The fairseq task mixin that records the training data in every checkpoint a task saves and
checks the data of every checkpoint it loads (:mod:`.record`)."""

from __future__ import annotations

import logging
from typing import Any, Dict, Optional

from .record import (
    TrainingRecord,
    dictionary_mismatch,
    new_run_id,
    note_missing_record,
    reversed_direction,
)
from .subword_models import check_subword_model, fairseq_subword_model

logger = logging.getLogger(__name__)


class RecordsTrainingData:
    """Mixin for fairseq tasks: the checkpoints they save record the training data
    (:class:`TrainingRecord`), and a checkpoint loaded for generation, scoring or export is refused
    when this task's dictionaries are not those it was trained with (:class:`DataMismatchError`,
    naming "the checkpoint"; the loader names the file)."""

    loaded_record: Optional[TrainingRecord] = None  # of the checkpoint loaded last
    run_id: Optional[str] = None
    started_from: Optional[str] = None

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
        """Training goes on from checkpoint ``path``: refuse other dictionaries (and, when resuming,
        the reverse direction); a resume continues the checkpoint's run, fine-tuning starts a new
        run that records where it started."""
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
        else:
            self.run_id, self.started_from = record.run_id or self.run_id, record.started_from

    def build_bpe(self, args: Any) -> Any:
        """fairseq's subword model, refused when the dictionaries hold symbols it cannot produce."""
        bpe = super().build_bpe(args)
        check_subword_model(fairseq_subword_model(bpe, args) if bpe is not None else None, self)
        return bpe
