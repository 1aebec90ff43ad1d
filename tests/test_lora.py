"""LoRA fine-tuning of a plain Transformer (step-count adaptation): W x + (α/r)·B A x on every
targeted linear map, only the adapters train, merging gives the same model."""

import pytest
import torch
from fairseq.modules.multihead_attention import MultiheadAttention

from ode_seq.models.lora import merge_adapters
from tests.conftest import TinyTask, build_model, random_batch
from tests.numerics import assert_computes, assert_equal_up_to_rounding, assert_incremental_decoding_equals_full_forward

PRE_NORM = dict(encoder_normalize_before=True, decoder_normalize_before=True)
RANK, ALPHA = 4, 12.0
TARGETS = ("q_proj", "k_proj", "v_proj", "out_proj", "fc1", "fc2")


def _models(task):
    """(plain pre-norm Transformer, LoRA model holding its weights), in float64."""
    plain = build_model("transformer", task, **PRE_NORM).double().eval()
    lora = build_model("lora_transformer", task, seed=7, lora_rank=RANK, lora_alpha=ALPHA, **PRE_NORM)
    lora.load_state_dict(plain.state_dict())
    return plain, lora.double().eval()


def _log_probs(model, batch):
    return model.get_normalized_probs(model(*batch), log_probs=True)


def _randomise_adapters(model, seed=0):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if ".lora_B." in name:
                p.copy_(torch.randn(p.shape, generator=g, dtype=p.dtype) * 0.3)


def _adapted_by_hand(plain, lora):
    """A copy of ``plain`` with W ← W + (α/r)·B A for every adapter of ``lora``, and per adapted
    weight the magnitude |W| + (α/r)·|B| |A| of the terms summed into it."""
    state, magnitudes = plain.state_dict(), {}
    weights = dict(lora.named_parameters())
    for name in list(state):
        module, _, leaf = name.rpartition(".")
        a = weights.get(f"{module}.lora_A.default.weight")
        if leaf == "weight" and a is not None:
            b = weights[f"{module}.lora_B.default.weight"].detach()
            magnitudes[name] = state[name].abs() + (ALPHA / RANK) * b.abs() @ a.detach().abs()
            state[name] = state[name] + (ALPHA / RANK) * b @ a.detach()
    adapted = build_model("transformer", TinyTask(), **PRE_NORM).double().eval()
    adapted.load_state_dict(state)
    return adapted, magnitudes


@pytest.mark.numerics
def test_plain_state_dict_loads_and_fresh_adapters_leave_the_model_unchanged():
    task = TinyTask()
    plain, lora = _models(task)
    batch = random_batch(task, [6, 3, 7])
    with torch.no_grad():
        assert_computes(lora, lambda: _log_probs(lora, batch), _log_probs(plain, batch))


def test_only_the_adapters_train_with_r_times_in_plus_out_parameters_each():
    _, lora = _models(TinyTask())
    trainable = {n: p.numel() for n, p in lora.named_parameters() if p.requires_grad}
    assert trainable and all(".lora_A." in n or ".lora_B." in n for n in trainable)
    expected = 0
    for name, module in lora.named_modules():
        if name.rpartition(".")[2] in TARGETS:
            base = module.get_base_layer()
            expected += RANK * (base.in_features + base.out_features)
    assert sum(trainable.values()) == expected
    assert len(trainable) == 2 * (6 * 2 + 10 * 2)  # A and B; 6 targets per encoder layer, 10 per decoder layer


@pytest.mark.numerics
def test_adapters_act_in_the_full_forward_and_in_incremental_decoding():
    # fairseq's fused attention path reads q_proj.weight directly and would skip the adapters.
    task = TinyTask()
    plain, lora = _models(task)
    _randomise_adapters(lora)
    adapted, _ = _adapted_by_hand(plain, lora)
    batch = random_batch(task, [6, 3, 7])
    with torch.no_grad():
        expected = _log_probs(adapted, batch)
        assert (expected - _log_probs(plain, batch)).abs().max() > 1e-2
        assert_computes(lora, lambda: _log_probs(lora, batch), expected)
    assert_incremental_decoding_equals_full_forward(lora, task, [6, 3, 7])


@pytest.mark.numerics
def test_merging_gives_the_plain_transformer_of_the_adapted_weights():
    task = TinyTask()
    plain, lora = _models(task)
    _randomise_adapters(lora, seed=1)
    adapted, magnitudes = _adapted_by_hand(plain, lora)
    merged = merge_adapters(lora)
    assert merged.state_dict().keys() == plain.state_dict().keys()
    assert not any(m.skip_embed_dim_check for m in merged.modules() if isinstance(m, MultiheadAttention))
    for name, value in adapted.state_dict().items():  # W + (α/r)·B A: two reductions (a rank-r product, a sum)
        assert_equal_up_to_rounding(merged.state_dict()[name], value, 2, msg=name, magnitude=magnitudes.get(name))


@pytest.mark.parametrize(
    "overrides, message",
    [
        (dict(lora_rank=0), "--lora-rank must be a positive integer"),
        (dict(lora_targets=","), "--lora-targets names no module"),
        (dict(lora_dropout=1.0), r"--lora-dropout must be in \[0, 1\)"),
    ],
)
def test_invalid_lora_options_fail_naming_the_option(overrides, message):
    with pytest.raises(ValueError, match=message):
        build_model("lora_transformer", TinyTask(), **PRE_NORM, **overrides)
