"""Fixes to fairseq 0.12 behaviour that would silently lose a user's data, applied on import.

- ``data_utils.batch_by_size`` drops the last batch when its size is not a multiple of
  ``--required-batch-size-multiple`` (default 8). Batches are consecutive slices of the
  length-sorted indices, so that batch holds the *longest* sentences: fairseq-train never
  trains on them and fairseq-generate never translates them. The fix keeps fairseq's batches
  and appends the dropped tail as one more batch, so every index is in exactly one batch.
- ``NGramRepeatBlock._no_repeat_ngram`` (the blocker used whenever fairseq's CUDA extension is
  not built, e.g. on every CPU) compares the last n−1 entries of the whole, mostly unfilled
  token buffer instead of the last n−1 generated tokens, so ``--no-repeat-ngram-size`` never
  blocks anything (fairseq issues #4709, #5206). It is replaced by the intended rule: at step
  s, token x_{i+n−1} is banned for every i with x_i … x_{i+n−2} = x_{s−n+2} … x_s.
- torch >= 2.6 loads checkpoints with ``weights_only=True`` and refuses fairseq's
  ``argparse.Namespace``; it is allow-listed (safe loading stays on). A checkpoint that is
  truncated, fails its CRC check, or pickles any other type is refused with an error naming
  the file and the problem (:mod:`ode_seq.checkpoint_safety`).
- ``save_checkpoint`` writes checkpoint_last.pt etc. by copying in place: a crash during the
  copy leaves a truncated file. Copies now go to a temporary name and are renamed.
- ``DistributedFairseqModel`` gives torch's DDP ``device_ids=[0]`` even for CPU modules,
  which DDP refuses; CPU modules get ``None`` (gloo training on CPU).
- ``--bf16`` switched on fairseq's TPU code path even with ``--cpu``; on CPU it stays off.
- A translation data directory missing a dictionary or a split raises FileNotFoundError
  without the fix; the message now says which files fairseq-preprocess writes.
"""
from __future__ import annotations

import functools
import math
import os

import numpy as np
import torch
from fairseq import checkpoint_utils, options
from fairseq.data import data_utils
from fairseq.file_io import PathManager
from fairseq.models import distributed_fairseq_model
from fairseq.ngram_repeat_block import NGramRepeatBlock
from fairseq.tasks import translation

from ode_seq.checkpoint_safety import allow_fairseq_checkpoint_types, checked_fairseq_loader


def _keeping_every_index(batch_by_size):
    @functools.wraps(batch_by_size)
    def wrapper(indices, *args, **kwargs):
        if not isinstance(indices, np.ndarray):
            indices = np.fromiter(indices, dtype=np.int64, count=-1)
        batches = batch_by_size(indices, *args, **kwargs)
        covered = sum(len(b) for b in batches)
        if covered < len(indices):
            batches = list(batches) + [indices[covered:]]
        return batches

    wrapper.keeps_every_index = True
    return wrapper


def block_repeated_ngrams(tokens: torch.Tensor, lprobs: torch.Tensor, step: int, n: int) -> torch.Tensor:
    """Set ``lprobs[r, t] = -inf`` where emitting t would repeat an n-gram of ``tokens[r, :step + 1]``."""
    if step + 2 - n <= 0:
        return lprobs
    generated = tokens[:, : step + 1]
    windows = generated.unfold(1, n, 1)  # (rows, step + 2 - n, n): every n-gram x_i..x_{i+n-1}
    suffix = generated[:, step + 2 - n :]  # (rows, n - 1): the last n-1 tokens
    matches = (windows[:, :, : n - 1] == suffix.unsqueeze(1)).all(dim=2)
    rows, starts = matches.nonzero(as_tuple=True)
    lprobs[rows, windows[rows, starts, n - 1]] = -math.inf
    return lprobs


def _no_repeat_ngram(self: NGramRepeatBlock, tokens, lprobs, bsz: int, beam_size: int, step: int):
    return block_repeated_ngrams(tokens, lprobs, step, self.no_repeat_ngram_size)


class _AtomicCopyPathManager(PathManager):
    """PathManager whose local copies appear complete or not at all."""

    @staticmethod
    def copy(src_path: str, dst_path: str, overwrite: bool = False) -> bool:
        if not (os.path.exists(src_path) and os.path.isdir(os.path.dirname(dst_path) or ".")):
            return PathManager.copy(src_path, dst_path, overwrite)
        tmp = f"{dst_path}.tmp{os.getpid()}"
        ok = PathManager.copy(src_path, tmp, overwrite=True)
        os.replace(tmp, dst_path)
        return ok


def _ddp_on_any_device(ddp_class):
    def build(module, device_ids=None, output_device=None, **kwargs):
        if next(module.parameters()).device.type == "cpu":
            device_ids = output_device = None
        return ddp_class(module, device_ids=device_ids, output_device=output_device, **kwargs)

    build.handles_cpu = True
    return build


def _bf16_without_tpu_on_cpu(parse_args_and_arch):
    @functools.wraps(parse_args_and_arch)
    def parse(*args, **kwargs):
        parsed = parse_args_and_arch(*args, **kwargs)
        namespace = parsed[0] if isinstance(parsed, tuple) else parsed
        if getattr(namespace, "bf16", False) and getattr(namespace, "cpu", False):
            namespace.tpu = False
        return parsed

    parse.keeps_cpu = True
    return parse


PREPROCESS_HINT = (
    "; fairseq-preprocess writes dict.{src,tgt}.txt and {split}.{src}-{tgt}.{src,tgt}.{bin,idx} "
    "into the data directory (e.g. fairseq-preprocess --trainpref ... --validpref ... --destdir DIR)"
)


def _hinting_missing_data(function):
    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        try:
            return function(*args, **kwargs)
        except FileNotFoundError as error:
            if "fairseq-preprocess" in str(error):
                raise
            raise FileNotFoundError(f"{error}{PREPROCESS_HINT}") from None

    wrapper.hints_preprocess = True
    return wrapper


def apply() -> None:
    if not getattr(data_utils.batch_by_size, "keeps_every_index", False):
        data_utils.batch_by_size = _keeping_every_index(data_utils.batch_by_size)
    NGramRepeatBlock._no_repeat_ngram = _no_repeat_ngram
    allow_fairseq_checkpoint_types()
    if not getattr(checkpoint_utils.load_checkpoint_to_cpu, "names_file", False):
        checkpoint_utils.load_checkpoint_to_cpu = checked_fairseq_loader(checkpoint_utils.load_checkpoint_to_cpu)
    checkpoint_utils.PathManager = _AtomicCopyPathManager
    ddp = distributed_fairseq_model.DistributedDataParallel
    if not getattr(ddp, "handles_cpu", False):
        distributed_fairseq_model.DistributedDataParallel = _ddp_on_any_device(ddp)
    task = translation.TranslationTask
    if not getattr(task.setup_task, "hints_preprocess", False):
        task.setup_task = classmethod(_hinting_missing_data(task.setup_task.__func__))
        task.load_dataset = _hinting_missing_data(task.load_dataset)
    if not getattr(options.parse_args_and_arch, "keeps_cpu", False):
        options.parse_args_and_arch = _bf16_without_tpu_on_cpu(options.parse_args_and_arch)
