"""Keep fairseq-train's ``--patience`` count across a resume."""

from __future__ import annotations

import sys
from typing import Any, Dict, Optional

from fairseq.trainer import Trainer

from .fix import ReplacementFix

PATIENCE_STATE = "ode_seq_patience"  # the extra_state entry of a checkpoint


def patience_counter() -> Optional[Any]:
    """fairseq-train's ``should_stop_early``, which keeps the count in its attributes ``best``
    (the validation value counted from) and ``num_runs`` (validations since, without a better one)."""
    train = sys.modules.get("fairseq_cli.train")
    return getattr(train, "should_stop_early", None)


class PatienceKeepingTrainer(Trainer):
    """fairseq's ``Trainer`` whose checkpoints carry the patience count, which a resumed run
    continues unless it resets the optimizer or the meters (as fairseq then forgets the best
    validation value too)."""

    def save_checkpoint(self, filename: str, extra_state: Dict[str, Any]) -> None:
        counter = patience_counter()
        if counter is not None and hasattr(counter, "best"):
            extra_state = {**extra_state, PATIENCE_STATE: {"best": counter.best, "num_runs": counter.num_runs}}
        super().save_checkpoint(filename, extra_state)

    def load_checkpoint(
        self,
        filename: str,
        reset_optimizer: bool = False,
        reset_lr_scheduler: bool = False,
        optimizer_overrides: Optional[Dict[str, Any]] = None,
        reset_meters: bool = False,
    ) -> Optional[Dict[str, Any]]:
        extra_state = super().load_checkpoint(
            filename, reset_optimizer, reset_lr_scheduler, optimizer_overrides, reset_meters
        )
        counter = patience_counter()
        kept = (extra_state or {}).get(PATIENCE_STATE)
        if kept is not None and counter is not None and not (reset_optimizer or reset_meters):
            counter.best, counter.num_runs = kept["best"], kept["num_runs"]
        return extra_state


class PatienceAcrossResume(ReplacementFix):
    """fairseq-train keeps the ``--patience`` count (the best validation value and the
    validations since) in attributes of a function, which no checkpoint saves: a resumed run
    counts anew, from its first validation taken as the best even when it is worse than the
    run's best, so it stops later than the same run uninterrupted, or never if it is resumed often
    enough. The fix: fairseq-train builds a ``Trainer`` subclass whose checkpoints carry the count
    and whose resume restores it."""

    name = "patience_across_resume"
    patches = ("fairseq_cli.train.Trainer",)
    replacement = PatienceKeepingTrainer
    program_module = True
