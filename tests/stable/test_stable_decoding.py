"""Stable decoder blocks: incremental decoding equals the full forward pass; beam search."""
import pytest
import torch
from fairseq.models import FairseqEncoderDecoderModel
from fairseq.sequence_generator import SequenceGenerator

from tests.conftest import TinyTask, build_model, incremental_decoding_error, random_batch
from tests.test_decoder_blocks import _RecomputingDecoder


@pytest.mark.parametrize("kernel", ["dot", "l2"])
@pytest.mark.parametrize("method, steps, options", [
    ("euler", 5, {}),
    ("rk4", 2, {}),
    ("heun", 3, {"spectral_norm_constraint": True, "ode_field": "residual-branch"}),
])
def test_stable_incremental_decoding_equals_full_forward(kernel, method, steps, options):
    task = TinyTask()
    model = build_model(
        "stable_ode_transformer_small", task, attention_kernel=kernel, decoder_ode_method=method,
        decoder_ode_steps=steps, encoder_ode_method=method, **options,
    ).eval()
    assert incremental_decoding_error(model, task, [6, 3, 8, 5], seed=4) <= 1e-5


def test_stable_beam_search_with_caches_equals_prefix_recomputation():
    task = TinyTask()
    model = build_model(
        "stable_ode_transformer_l2_small", task, decoder_ode_method="rk4", decoder_ode_steps=2,
        seed=7,
    ).eval()
    reference = FairseqEncoderDecoderModel(model.encoder, _RecomputingDecoder(model.decoder)).eval()
    src, lengths, _ = random_batch(task, [7, 5, 9], seed=2)
    sample = {"net_input": {"src_tokens": src, "src_lengths": lengths}}
    outputs = []
    for m in (model, reference):
        generator = SequenceGenerator([m], task.target_dictionary, beam_size=4, max_len_b=10)
        outputs.append(generator.generate([m], sample))
    for cached, recomputed in zip(*outputs):
        for a, b in zip(cached, recomputed):
            assert torch.equal(a["tokens"], b["tokens"])
            torch.testing.assert_close(a["positional_scores"], b["positional_scores"], atol=1e-5, rtol=0)
