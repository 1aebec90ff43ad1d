"""Make --no-repeat-ngram-size block repeated n-grams on CPU."""

from __future__ import annotations

import math

import torch
from fairseq.ngram_repeat_block import NGramRepeatBlock

from .fix import ReplacementFix


def block_repeated_ngrams(tokens: torch.Tensor, lprobs: torch.Tensor, step: int, n: int) -> torch.Tensor:
    """Set ``lprobs[r, t] = -inf`` where emitting t would repeat an n-gram of ``tokens[r, :step + 1]``:
    t is banned if x_i … x_{i+n−2} = x_{s−n+2} … x_s and t = x_{i+n−1} for some i."""
    if step + 2 - n <= 0:
        return lprobs
    generated = tokens[:, : step + 1]
    windows = generated.unfold(1, n, 1)  # (rows, step + 2 - n, n): every n-gram x_i..x_{i+n-1}
    suffix = generated[:, step + 2 - n :]  # (rows, n - 1): the last n-1 tokens
    matches = (windows[:, :, : n - 1] == suffix.unsqueeze(1)).all(dim=2)
    rows, starts = matches.nonzero().unbind(1)  # not nonzero(as_tuple=True), which TorchScript refuses
    lprobs[rows, windows[rows, starts, n - 1]] = -math.inf
    return lprobs


class IntendedNGramRepeatBlock(NGramRepeatBlock):
    """fairseq's blocker with the intended rule where its CUDA extension is not used."""

    def _no_repeat_ngram(self, tokens, lprobs, bsz: int, beam_size: int, step: int):
        return block_repeated_ngrams(tokens, lprobs, step, self.no_repeat_ngram_size)


class NGramBlocking(ReplacementFix):
    """fairseq's ``NGramRepeatBlock._no_repeat_ngram`` (the blocker whenever the CUDA extension is
    not built, e.g. on every CPU) compares the last n−1 entries of the whole, mostly unfilled
    token buffer instead of the last n−1 generated tokens, so ``--no-repeat-ngram-size`` never
    blocks anything. The fix: the sequence generator builds a subclass with the intended rule, which
    TorchScript compiles as it does fairseq's (``torch.jit.script`` of a SequenceGenerator)."""

    name = "ngram_blocking"
    issues = ("facebookresearch/fairseq#4709", "facebookresearch/fairseq#5206")
    patches = ("fairseq.sequence_generator.NGramRepeatBlock",)
    replacement = IntendedNGramRepeatBlock
