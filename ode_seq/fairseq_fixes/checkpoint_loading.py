"""Load fairseq checkpoints under torch's safe unpickler, with errors that name the file."""

from __future__ import annotations

import functools
import pickle
from typing import Callable

from fairseq import checkpoint_utils

from ode_seq.checkpoint_files import allow_fairseq_checkpoint_types, unpickling_refusal, verify_checkpoint_file

from .fix import FairseqFix


def checked_loader(load: Callable) -> Callable:
    """fairseq's ``load_checkpoint_to_cpu`` that first checks the file (a truncated archive or a
    member failing its CRC) and names the file when the unpickler refuses a type."""

    @functools.wraps(load)
    def checked(path, *args, **kwargs):
        try:
            verify_checkpoint_file(path)
        except ValueError as error:
            raise ValueError(f"{error} (fairseq-train can resume from another one with --restore-file)") from None
        try:
            return load(path, *args, **kwargs)
        except pickle.UnpicklingError as error:
            raise unpickling_refusal(path, error) from None

    return checked


class CheckpointLoading(FairseqFix):
    """torch ≥ 2.6 loads with ``weights_only=True`` and refuses fairseq's checkpoints, which
    pickle the training ``argparse.Namespace``; a truncated or corrupted checkpoint fails with
    an error that does not name the file. The fix allow-lists ``argparse.Namespace`` only (safe
    loading stays on) and checks every file fairseq loads, naming the file and the problem
    (:mod:`ode_seq.checkpoint_files`)."""

    name = "checkpoint_loading"
    issues = ("facebookresearch/fairseq#5610", "facebookresearch/fairseq#5603")
    patches = ("fairseq.checkpoint_utils.load_checkpoint_to_cpu",)
    changes_working_runs = False

    def apply(self) -> None:
        allow_fairseq_checkpoint_types()
        checkpoint_utils.load_checkpoint_to_cpu = checked_loader(checkpoint_utils.load_checkpoint_to_cpu)
