"""fairseq's Trainer built in this process from fairseq-train's command line (the GPU run's
checks and study, and the reliability tests)."""

from __future__ import annotations

import os
from contextlib import chdir
from typing import Any, Sequence, Tuple

from fairseq import options, tasks
from fairseq.data.iterators import EpochBatchIterator
from fairseq.dataclass.utils import convert_namespace_to_omegaconf
from fairseq.trainer import Trainer
from omegaconf import DictConfig, open_dict

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def parse_training_args(args: Sequence[str]) -> DictConfig:
    """fairseq-train's configuration for ``args``, parsed from the repository root
    (``--user-dir user_dir`` is relative to it)."""
    with chdir(ROOT):
        namespace = options.parse_args_and_arch(options.get_training_parser(), input_args=list(args))
    return convert_namespace_to_omegaconf(namespace)


def fairseq_trainer(args: Sequence[str], **common: Any) -> Tuple[Trainer, EpochBatchIterator]:
    """The Trainer fairseq-train would build from ``args`` (``common`` overrides ``cfg.common``
    after parsing) and its epoch iterator, positioned before epoch 1."""
    cfg = parse_training_args(args)
    with open_dict(cfg):
        for key, value in common.items():
            setattr(cfg.common, key, value)
    task = tasks.setup_task(cfg.task)
    task.load_dataset(cfg.dataset.train_subset)
    trainer = Trainer(cfg, task, task.build_model(cfg.model), task.build_criterion(cfg.criterion))
    return trainer, trainer.get_train_iterator(epoch=1)
