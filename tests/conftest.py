"""Shared test helpers: small models built the way fairseq builds them."""

from __future__ import annotations

import os
import sys
from typing import Iterator

import pytest
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from fairseq.models import FairseqDecoder, FairseqEncoderDecoderModel  # noqa: E402
from fairseq.sequence_generator import SequenceGenerator  # noqa: E402

import user_dir  # noqa: E402,F401  (registers models and architectures)
from benchmarks.gpu_checks import Task, incremental_decoding_error, random_batch  # noqa: E402,F401
from benchmarks.gpu_checks import build_model as build_sized_model  # noqa: E402

TINY = dict(
    encoder_embed_dim=32,
    decoder_embed_dim=32,
    encoder_ffn_embed_dim=64,
    decoder_ffn_embed_dim=64,
    encoder_attention_heads=4,
    decoder_attention_heads=4,
    encoder_layers=2,
    decoder_layers=2,
)


class TinyTask(Task):
    """The two dictionaries fairseq's build_model reads from a task."""

    def __init__(self, vocab: int = 30) -> None:
        super().__init__(vocab)


def build_model(arch: str, task: TinyTask | None = None, seed: int = 0, **overrides):
    """fairseq model ``arch`` with tiny sizes; ``overrides`` are command-line option values."""
    return build_sized_model(arch, task or TinyTask(), seed, **{**TINY, **overrides})


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
