"""Shared test helpers: small models built the way fairseq builds them."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Iterator

import pytest
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

import fairseq_cli.eval_lm  # noqa: E402,F401  (as fairseq-eval-lm has it before the plugin patches it)
import fairseq_cli.train  # noqa: E402,F401  (as fairseq-train has it before the plugin patches it)
from fairseq.models import FairseqDecoder, FairseqEncoderDecoderModel  # noqa: E402
from fairseq.sequence_generator import SequenceGenerator  # noqa: E402

import user_dir  # noqa: E402,F401  (registers models and architectures)
from testkit.by_name import DictionaryTask, random_batch, word_dictionary  # noqa: E402,F401
from testkit.by_name import build_model as build_sized_model  # noqa: E402
from testkit.families import FEATURES  # noqa: E402
from tests.e2e.corpus import lm_data_bin, reversal_data_bin  # noqa: E402
from tests.numerics import LayerEvaluations, assert_equal_up_to_rounding, model_precision  # noqa: E402

# Tiny sizes, the same in the encoder and the decoder: d = 32, FFN 64, 4 heads, 2 layers.
TINY = {
    f"{side}_{option}": value
    for side in ("encoder", "decoder")
    for option, value in dict(embed_dim=32, ffn_embed_dim=64, attention_heads=4, layers=2).items()
}


class TinyTask(DictionaryTask):
    """The two dictionaries fairseq's build_model reads from a task: ``vocab`` words."""

    def __init__(self, vocab: int = 30) -> None:
        super().__init__(word_dictionary(vocab))


def build_model(arch: str, task: TinyTask | None = None, seed: int = 0, **overrides):
    """fairseq model ``arch`` with tiny sizes; ``overrides`` are command-line option values."""
    return build_sized_model(arch, task or TinyTask(), seed, **{**TINY, **overrides})


def build_family_model(feature: str, task: TinyTask | None = None, **overrides):
    """The tiny model of :data:`testkit.families.FEATURES` ``feature`` (e.g. "dopri5, parallel field,
    shared weights": the adaptive solver, without dropout)."""
    arch, options = FEATURES[feature]
    return build_model(arch, task, **{**options, **overrides})


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


def assert_beam_search_with_caches_equals_prefix_recomputation(model, task: TinyTask, beam: int, max_len_b: int):
    """Per sentence of a fixed batch, beam search with incremental caches gives the hypotheses of a
    decoder that recomputes the whole prefix at every step: the same tokens, and positional scores
    equal up to rounding over the layer evaluations of one teacher-forced pass."""
    reference = FairseqEncoderDecoderModel(model.encoder, RecomputingDecoder(model.decoder)).eval()
    src, lengths, prev = random_batch(task, [7, 5, 9], seed=2)
    sample = {"net_input": {"src_tokens": src, "src_lengths": lengths}}
    outputs = []
    for m in (model, reference):
        generator = SequenceGenerator([m], task.target_dictionary, beam_size=beam, max_len_b=max_len_b)
        outputs.append(generator.generate([m], sample))
    with LayerEvaluations(model) as evaluations, torch.no_grad():
        model(src, lengths, prev)
    precision = model_precision(next(model.parameters()).dtype)
    for cached, recomputed in zip(*outputs):
        assert len(cached) == len(recomputed) == beam
        for a, b in zip(cached, recomputed):
            assert torch.equal(a["tokens"], b["tokens"])
            assert_equal_up_to_rounding(a["positional_scores"], b["positional_scores"], evaluations.count, precision)


THREADS_VARIABLE = "ODE_SEQ_TEST_THREADS"


def torch_threads() -> int:
    """torch's intra-op thread count for in-process models: ``ODE_SEQ_TEST_THREADS`` (the numerics
    runs of scripts/test_numerics.sh set 1 and 2), else 1."""
    value = os.environ.get(THREADS_VARIABLE, "1")
    if not value.isdigit() or int(value) < 1:
        raise pytest.UsageError(f"{THREADS_VARIABLE}={value!r}: give a positive number of threads, e.g. 2")
    return int(value)


def pytest_configure(config) -> None:
    if THREADS_VARIABLE in os.environ:
        torch.set_num_threads(torch_threads())


def fixed_torch_threads() -> Iterator[None]:
    """Fixture body: torch on :func:`torch_threads` intra-op threads during a test, the previous count after."""
    threads = torch.get_num_threads()
    torch.set_num_threads(torch_threads())
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="session", autouse=True)
def checkout_stays_clean() -> Iterator[None]:
    """Tests write under their tmp_path, never into the checkout: a folder a tool made there (such
    as fairseq-train's default --save-dir ``checkpoints``, made even with --no-save) changes later
    runs, e.g. a training in this process then holds its lock."""
    before = set(os.listdir(ROOT))
    yield
    made = sorted(set(os.listdir(ROOT)) - before - {".pytest_cache"})
    assert not made, f"the tests made {made} in the checkout {ROOT}: give the tool a path under tmp_path"


@pytest.fixture
def task() -> TinyTask:
    return TinyTask()


@pytest.fixture(scope="session")
def data_bin(tmp_path_factory) -> Path:
    """The reversal corpus (tests.e2e.corpus), binarised; read it, never change it."""
    return reversal_data_bin(tmp_path_factory.mktemp("raw"))


@pytest.fixture(scope="session")
def lm_data(tmp_path_factory) -> Path:
    """The language-model corpus binarised (fairseq-preprocess --only-source); the text is in its
    parent; read it, never change it."""
    return lm_data_bin(tmp_path_factory.mktemp("lm_raw"))


# The longest test files (minutes each), longest first. scripts/test.sh gives each worker whole
# files (--dist loadfile) in collection order; one of these collected last would keep its worker
# busy while the others have nothing left to take.
LONGEST_FILES = (
    "tests/e2e/test_quality_study.py",
    "tests/e2e/test_lm_study.py",
    "tests/e2e/test_distillation_baseline.py",
    "tests/reliability/test_pipeline_faults.py",
    "tests/test_gpu_script.py",
    "tests/e2e/test_lm_pipeline.py",
    "tests/e2e/test_export.py",
)


def pytest_collection_modifyitems(config: pytest.Config, items: list) -> None:
    """Collect :data:`LONGEST_FILES` first, in that order; every other file keeps its place."""
    rank = {name: place for place, name in enumerate(LONGEST_FILES)}
    items.sort(key=lambda item: rank.get(Path(item.path).relative_to(config.rootpath).as_posix(), len(rank)))
