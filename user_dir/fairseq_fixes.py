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
  ``argparse.Namespace``; it is allow-listed (safe loading stays on).
"""
from __future__ import annotations

import functools
import math

import numpy as np
import torch
from fairseq.data import data_utils
from fairseq.ngram_repeat_block import NGramRepeatBlock

from ode_seq.checkpoint_safety import allow_fairseq_checkpoint_types


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


def apply() -> None:
    if not getattr(data_utils.batch_by_size, "keeps_every_index", False):
        data_utils.batch_by_size = _keeping_every_index(data_utils.batch_by_size)
    NGramRepeatBlock._no_repeat_ngram = _no_repeat_ngram
    allow_fairseq_checkpoint_types()
