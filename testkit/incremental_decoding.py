"""Incremental decoding against the full forward pass: a decoder that caches its keys and values
(for ODE blocks, one cache per stage) must give at every position the log-probabilities of one
teacher-forced pass over the whole prefix. Used by the tests and by benchmarks/gpu_checks.py."""

from __future__ import annotations

from typing import Any, Sequence, Tuple

import torch

from .by_name import random_batch


def full_and_incremental_log_probs(
    model: Any, task: Any, lengths: Sequence[int], seed: int = 0
) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(full forward, one position at a time with incremental state) log-probabilities as fp32, and
    the mask of non-pad target positions, on :func:`random_batch` (task, lengths, seed); ``model``
    must be in eval mode."""
    device = next(model.parameters()).device
    src, src_lengths, prev = random_batch(task, lengths, seed=seed, device=device)
    with torch.no_grad():
        full = model.get_normalized_probs(model(src, src_lengths, prev), log_probs=True).float()
        encoder_out = model.encoder(src, src_lengths=src_lengths)
        state, steps = {}, []
        for t in range(prev.size(1)):
            out = model.decoder(prev[:, : t + 1], encoder_out=encoder_out, incremental_state=state)
            steps.append(model.get_normalized_probs(out, log_probs=True).float())
    return full, torch.cat(steps, dim=1), prev.ne(task.target_dictionary.pad())


def max_difference(a: torch.Tensor, b: torch.Tensor, mask: torch.Tensor) -> float:
    """max |a − b| over the positions in ``mask`` (last dimension: the vocabulary); NaN if any is."""
    return (a - b).abs().amax(dim=-1)[mask].max().item()
