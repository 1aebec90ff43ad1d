"""Shared test helpers: small models built the way fairseq builds them."""
from __future__ import annotations

import argparse
import os
import sys
from typing import Iterator

import pytest
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

import user_dir  # noqa: E402,F401  (registers models and architectures)
from fairseq.data import Dictionary  # noqa: E402
from fairseq.models import (  # noqa: E402
    ARCH_CONFIG_REGISTRY, ARCH_MODEL_REGISTRY, FairseqDecoder, FairseqEncoderDecoderModel,
)
from fairseq.sequence_generator import SequenceGenerator  # noqa: E402

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


class RecomputingDecoder(FairseqDecoder):
    """Reference path without caches: recomputes the whole prefix at every step."""

    def __init__(self, decoder):
        super().__init__(decoder.dictionary)
        self.inner = decoder

    def forward(self, prev_output_tokens, encoder_out=None, **kwargs):
        return self.inner(prev_output_tokens, encoder_out=encoder_out)

    def get_normalized_probs(self, net_output, log_probs, sample=None):
        return self.inner.get_normalized_probs(net_output, log_probs, sample)

    def max_positions(self):
        return self.inner.max_positions()


def beam_search_with_and_without_caches(model, task: TinyTask, beam: int, max_len_b: int):
    """Per sentence of a fixed batch, (hypotheses with incremental caches, hypotheses from a
    decoder that recomputes the whole prefix at every step)."""
    reference = FairseqEncoderDecoderModel(model.encoder, RecomputingDecoder(model.decoder)).eval()
    src, lengths, _ = random_batch(task, [7, 5, 9], seed=2)
    sample = {"net_input": {"src_tokens": src, "src_lengths": lengths}}
    outputs = []
    for m in (model, reference):
        generator = SequenceGenerator([m], task.target_dictionary, beam_size=beam, max_len_b=max_len_b)
        outputs.append(generator.generate([m], sample))
    return list(zip(*outputs))


def assert_same_hypotheses(cached, recomputed) -> None:
    """Same tokens, positional scores within 1e-5, hypothesis by hypothesis."""
    for a, b in zip(cached, recomputed):
        assert torch.equal(a["tokens"], b["tokens"])
        torch.testing.assert_close(a["positional_scores"], b["positional_scores"], atol=1e-5, rtol=0)


def one_torch_thread() -> Iterator[None]:
    """Fixture body: torch on one intra-op thread during a test, the previous count after."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture
def task() -> TinyTask:
    return TinyTask()
