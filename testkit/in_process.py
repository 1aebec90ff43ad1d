"""fairseq-train's configuration and Trainer, built in this process from its command line (the
GPU run's checks and study, and the reliability tests).

    trainer, epoch = fairseq_trainer([data_bin, "--user-dir", PLUGIN_DIR, "--arch", "ode_transformer_rk4", ...])
"""

from __future__ import annotations

import os
from contextlib import chdir
from typing import Any, Sequence, Tuple

from fairseq import options, tasks
from fairseq.data.iterators import EpochBatchIterator
from fairseq.dataclass.utils import convert_namespace_to_omegaconf
from fairseq.trainer import Trainer
from omegaconf import DictConfig, open_dict

# The checkout: the folder holding the ode_seq and user_dir packages.
PACKAGES = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PLUGIN_DIR = os.path.join(PACKAGES, "user_dir")


def parse_training_args(args: Sequence[str]) -> DictConfig:
    """fairseq-train's configuration for ``args``, parsed from :data:`PACKAGES` (so that
    ``--user-dir user_dir`` names ode-seq's plugin, and other relative paths are relative to it)."""
    with chdir(PACKAGES):
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
