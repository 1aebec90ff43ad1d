"""Refuse to train from scratch over an existing run when the checkpoint to resume from is missing."""

from __future__ import annotations

import functools
import os
import re
from typing import Callable, List

from fairseq import checkpoint_utils

from .fix import FairseqFix

# Files fairseq-train writes into --save-dir: checkpoint_last.pt, checkpoint_best.pt,
# checkpoint3.pt, checkpoint_2_500.pt, checkpoint.best_loss_4.12.pt (with any --checkpoint-suffix).
SAVED_CHECKPOINT = re.compile(r"checkpoint(_last|_best|\d+|_\d+_\d+|\.best_.+)?.*\.pt$")
FRESH_START = (
    "to start a new run on purpose, leave out --restore-file (and --continue-once) and give a "
    "--save-dir without checkpoints"
)


def saved_checkpoints(save_dir: str) -> List[str]:
    if not os.path.isdir(save_dir):
        return []
    return sorted(name for name in os.listdir(save_dir) if SAVED_CHECKPOINT.match(name))


def check_resume_source(cfg, suffix: str = "") -> None:
    """ValueError unless fairseq-train resumes from the checkpoint the user named, or starts a
    run that cannot overwrite another's checkpoints. ``cfg``: fairseq's CheckpointConfig."""
    named = [
        (option, path)
        for option, path in (
            ("--restore-file", None if cfg.restore_file == "checkpoint_last.pt" else cfg.restore_file),
            ("--continue-once", getattr(cfg, "continue_once", None)),
        )
        if path
    ]
    for option, path in named:
        if option == "--restore-file" and suffix:
            path = path.replace(".pt", suffix + ".pt")
        if os.path.isdir(path):
            raise ValueError(
                f"{option} {path} is a directory; name a checkpoint file, e.g. "
                f"{os.path.join(path, 'checkpoint_last.pt')} (nothing was trained or written)"
            )
        if option == "--continue-once" and os.path.exists(os.path.join(cfg.save_dir, f"checkpoint_last{suffix}.pt")):
            continue  # fairseq resumes from checkpoint_last.pt and ignores --continue-once
        if not os.path.exists(path):
            in_save_dir = os.path.join(cfg.save_dir, path)
            hint = (
                f" (the path is not relative to --save-dir: did you mean {in_save_dir}?)"
                if not os.path.isabs(path) and os.path.isfile(in_save_dir)
                else ""
            )
            raise ValueError(
                f"{option} {path} does not exist{hint}: fairseq-train would train from scratch into "
                f"--save-dir {cfg.save_dir} (nothing was trained or written). Name an existing "
                f"checkpoint to resume from; {FRESH_START}"
            )
    if named or cfg.finetune_from_model:
        return
    if os.path.exists(os.path.join(cfg.save_dir, f"checkpoint_last{suffix}.pt")):
        return
    others = saved_checkpoints(cfg.save_dir)
    if others:
        raise ValueError(
            f"--save-dir {cfg.save_dir} holds checkpoints ({', '.join(others[:4])}"
            f"{', …' if len(others) > 4 else ''}) but no checkpoint_last{suffix}.pt to resume from: "
            "fairseq-train would train from scratch and overwrite them (nothing was trained or "
            f"written). To resume from one, pass --restore-file {os.path.join(cfg.save_dir, others[0])}; "
            f"{FRESH_START}"
        )


def checking_resume_source(load_checkpoint: Callable) -> Callable:
    """fairseq's ``checkpoint_utils.load_checkpoint`` that first runs :func:`check_resume_source`."""

    @functools.wraps(load_checkpoint)
    def load(cfg, trainer, **passthrough_args):
        check_resume_source(cfg, trainer.checkpoint_suffix)
        return load_checkpoint(cfg, trainer, **passthrough_args)

    return load


class RestoreFileMustExist(FairseqFix):
    """fairseq-train given a ``--restore-file`` (or ``--continue-once``) that does not exist, or
    is a directory, logs "No existing checkpoint found", trains from scratch and overwrites the
    run's checkpoint_last.pt and checkpoint_best.pt: one typo loses a run. The same happens when
    ``--save-dir`` holds a run's checkpoints but not checkpoint_last.pt. The fix: before anything
    is trained or saved, fairseq-train refuses, naming the file and how to start fresh on purpose."""

    name = "restore_file"
    issues = ("facebookresearch/metaseq#602",)
    patches = ("fairseq.checkpoint_utils.load_checkpoint",)

    def apply(self) -> None:
        checkpoint_utils.load_checkpoint = checking_resume_source(checkpoint_utils.load_checkpoint)
