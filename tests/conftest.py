"""Shared test helpers: small models built the way fairseq builds them."""
from __future__ import annotations

import argparse
import os
import sys

import pytest
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

import user_dir  # noqa: E402,F401  (registers models and architectures)
from fairseq.data import Dictionary  # noqa: E402
from fairseq.models import ARCH_CONFIG_REGISTRY, ARCH_MODEL_REGISTRY  # noqa: E402

TINY = dict(
    encoder_embed_dim=32, decoder_embed_dim=32, encoder_ffn_embed_dim=64,
    decoder_ffn_embed_dim=64, encoder_attention_heads=4, decoder_attention_heads=4,
    encoder_layers=2, decoder_layers=2,
)


class TinyTask:
    """The two dictionaries fairseq's build_model reads from a task."""

    def __init__(self, vocab: int = 30) -> None:
        d = Dictionary()
        for i in range(vocab):
            d.add_symbol(f"w{i}")
        self.source_dictionary = self.target_dictionary = d


def build_model(arch: str, task: TinyTask | None = None, seed: int = 0, **overrides):
    """fairseq model ``arch`` with tiny sizes; ``overrides`` are command-line option values."""
    args = argparse.Namespace(**{**TINY, **overrides})
    ARCH_CONFIG_REGISTRY[arch](args)
    torch.manual_seed(seed)
    return ARCH_MODEL_REGISTRY[arch].build_model(args, task or TinyTask())


def random_batch(task: TinyTask, lengths, seed: int = 0):
    """(src_tokens, src_lengths, prev_output_tokens) with right-padded sources and targets."""
    g = torch.Generator().manual_seed(seed)
    d = task.source_dictionary
    bsz, longest = len(lengths), max(lengths)
    src = torch.full((bsz, longest), d.pad())
    tgt = torch.full((bsz, longest + 1), d.pad())
    for i, n in enumerate(lengths):
        src[i, longest - n:] = torch.randint(d.nspecial, len(d), (n,), generator=g)
        tgt[i, 0] = d.eos()
        tgt[i, 1 : n + 1] = torch.randint(d.nspecial, len(d), (n,), generator=g)
    return src, torch.tensor(lengths), tgt


def incremental_decoding_error(model, task: TinyTask, lengths, seed: int = 0) -> float:
    """Largest |Δ log p| over non-pad target positions between the full forward pass and decoding
    one position at a time with incremental state (the model must be in eval mode)."""
    src, src_lengths, prev = random_batch(task, lengths, seed=seed)
    with torch.no_grad():
        full = model.get_normalized_probs(model(src, src_lengths, prev), log_probs=True)
        encoder_out = model.encoder(src, src_lengths=src_lengths)
        state, steps = {}, []
        for t in range(prev.size(1)):
            out = model.decoder(prev[:, : t + 1], encoder_out=encoder_out, incremental_state=state)
            steps.append(model.get_normalized_probs(out, log_probs=True))
    not_pad = prev.ne(task.target_dictionary.pad())
    return (full - torch.cat(steps, dim=1)).abs().amax(dim=-1)[not_pad].max().item()


@pytest.fixture
def task() -> TinyTask:
    return TinyTask()
