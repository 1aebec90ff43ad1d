"""Exact step-by-step decoding of ode_seq.transformers' models: one key/value cache per evaluation
(layer, step, stage) in transformers' DynamicCache, so the logits of a cached pass equal the full
pass's and generate() (greedy, seeded sampling, beam search with its cache reordering, left-padded
batches, prompt lookup with its cache cropping) equals decoding without a cache, for every decoder
ODE setting and every family."""

import pytest
import torch
from transformers import DynamicCache

from ode_seq.solvers.tableaus import TABLEAUS
from tests.numerics import assert_equal_up_to_rounding
from tests.transformers.ode_models import (
    LEFT_PADDED,
    TOKENS,
    assert_incremental_equals_full,
    field_evaluations,
    ode_model,
)

# Every decoder ODE setting (ode_seq.transformers.settings), each away from its default; every tableau.
SETTINGS = {
    **{method: dict(decoder_ode_method=method) for method in TABLEAUS},
    "rk4-2-steps": dict(decoder_ode_method="rk4", decoder_ode_steps=2),
    "heun-3-steps-over-2": dict(decoder_ode_method="heun", decoder_ode_steps=3, decoder_ode_interval=2.0),
    **{
        f"rk3-{mode}": dict(decoder_ode_method="rk3", ode_coefficients=mode)
        for mode in ("learned", "learned-shared", "free", "free-ones", "ema")
    },
    "parallel-branch": dict(decoder_ode_method="heun", ode_field="parallel-branch"),
    "whole-layer": dict(decoder_ode_method="heun", ode_field="whole-layer"),
    "rk-sublayer-2-steps": dict(decoder_ode_method="heun", ode_scope="sublayer", decoder_ode_steps=2),
    "pcformer": dict(decoder_ode_method="heun", ode_coefficients="ema", decoder_ode_corrector="multistep"),
    "pcformer-m0-2-steps": dict(
        decoder_ode_method="rk3",
        decoder_ode_corrector="multistep",
        decoder_ode_corrector_history=0,
        decoder_ode_steps=2,
    ),
}


@pytest.mark.parametrize("setting", SETTINGS.values(), ids=SETTINGS.keys())
def test_incremental_equals_full_forward_for_every_setting(setting):
    assert_incremental_equals_full(ode_model("llama", **setting))


FAMILY_SETTINGS = {"rk4-2-steps": SETTINGS["rk4-2-steps"], "pcformer": SETTINGS["pcformer"]}


@pytest.mark.parametrize("setting", FAMILY_SETTINGS.values(), ids=FAMILY_SETTINGS.keys())
@pytest.mark.parametrize("family", ["qwen2", "mistral", "gpt2"])
def test_incremental_equals_full_forward_for_every_family(family, setting):
    """Mistral's window (4) is shorter than the inputs (9): its sliding cache layer drops keys."""
    assert_incremental_equals_full(ode_model(family, **setting))


def test_incremental_equals_full_forward_while_gradients_are_recorded():
    """Without gradients the evaluations write into the block's grown cache layer in place (the
    tests above); with gradients recorded they extend copies of it, and the backward pass runs."""
    model = ode_model("llama", decoder_ode_method="rk4", decoder_ode_steps=2)
    with torch.no_grad():
        full = model(TOKENS, attention_mask=LEFT_PADDED, use_cache=False).logits
    out = model(TOKENS[:, :3], attention_mask=LEFT_PADDED[:, :3], use_cache=True)
    logits = [out.logits]
    for t in range(3, TOKENS.size(1)):
        out = model(TOKENS[:, t : t + 1], attention_mask=LEFT_PADDED[:, : t + 1], cache=out.cache, use_cache=True)
        logits.append(out.logits)
    incremental = torch.cat(logits, dim=1)
    incremental.square().sum().backward()
    assert_equal_up_to_rounding(incremental.detach(), full, field_evaluations(model.config), torch.float32)


def test_the_cache_holds_one_slice_of_heads_per_evaluation():
    """2 RK4 steps: 8 evaluations, each with the family's 2 key/value heads, side by side."""
    model = ode_model("llama", decoder_ode_method="rk4", decoder_ode_steps=2)
    with torch.no_grad():
        cache = model(TOKENS, use_cache=True).cache
    assert isinstance(cache, DynamicCache)
    assert [tuple(layer.keys.shape) for layer in cache.layers] == [(2, 8 * 2, 9, 8)] * 2
    assert cache.get_seq_length() == 9


def test_a_prompt_longer_than_one_position_continues_any_cache():
    """Two passes of several positions each (a chunked prompt) = one full pass."""
    model = ode_model("llama", decoder_ode_method="heun", decoder_ode_corrector="multistep")
    with torch.no_grad():
        full = model(TOKENS, attention_mask=LEFT_PADDED).logits
        first = model(TOKENS[:, :5], attention_mask=LEFT_PADDED[:, :5], use_cache=True)
        second = model(TOKENS[:, 5:], attention_mask=LEFT_PADDED, cache=first.cache, use_cache=True)
    chunked = torch.cat([first.logits, second.logits], dim=1)
    assert_equal_up_to_rounding(chunked, full, field_evaluations(model.config), torch.float32)


GENERATE = dict(max_new_tokens=6, pad_token_id=0)
DECODING_SETTINGS = {
    "rk4-2-steps": SETTINGS["rk4-2-steps"],
    "rk3-learned": SETTINGS["rk3-learned"],
    "pcformer": SETTINGS["pcformer"],
}


def greedy_without_cache(model, tokens: torch.Tensor, mask: torch.Tensor, new: int) -> torch.Tensor:
    """Greedy decoding by full passes over the whole prefix, positions counted from each row's
    first token (as generate() counts them for left-padded rows)."""
    for _ in range(new):
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        with torch.no_grad():
            logits = model(tokens, attention_mask=mask, position_ids=positions, use_cache=False).logits
        tokens = torch.cat([tokens, logits[:, -1].argmax(-1, keepdim=True)], dim=1)
        mask = torch.cat([mask, torch.ones_like(mask[:, :1])], dim=1)
    return tokens


@pytest.mark.parametrize("setting", DECODING_SETTINGS.values(), ids=DECODING_SETTINGS.keys())
def test_greedy_generate_equals_greedy_decoding_by_full_passes(setting):
    model = ode_model("llama", **setting)
    generated = model.generate(TOKENS, attention_mask=LEFT_PADDED, do_sample=False, eos_token_id=None, **GENERATE)
    assert torch.equal(generated, greedy_without_cache(model, TOKENS, LEFT_PADDED, GENERATE["max_new_tokens"]))


def generate_with_and_without_cache(model, seed: int = 0, **options):
    """generate()'s outputs with the cache and without it (full passes), each from ``seed``."""
    outputs = []
    for use_cache in (True, False):
        torch.manual_seed(seed)
        outputs.append(
            model.generate(
                TOKENS,
                attention_mask=LEFT_PADDED,
                use_cache=use_cache,
                return_dict_in_generate=True,
                output_scores=True,
                **GENERATE,
                **options,
            )
        )
    return outputs


@pytest.mark.parametrize("setting", DECODING_SETTINGS.values(), ids=DECODING_SETTINGS.keys())
def test_seeded_sampling_with_the_cache_equals_sampling_without(setting):
    cached, uncached = generate_with_and_without_cache(ode_model("llama", **setting), do_sample=True, top_k=0)
    assert torch.equal(cached.sequences, uncached.sequences)


@pytest.mark.parametrize("setting", DECODING_SETTINGS.values(), ids=DECODING_SETTINGS.keys())
def test_beam_search_with_the_cache_equals_beam_search_without(setting):
    """Beam search reorders the cache at every step; the beams and their scores match."""
    model = ode_model("llama", **setting)
    cached, uncached = generate_with_and_without_cache(model, num_beams=3, num_return_sequences=3, do_sample=False)
    assert torch.equal(cached.sequences, uncached.sequences)
    scores = (cached.sequences_scores, uncached.sequences_scores)
    assert_equal_up_to_rounding(*scores, field_evaluations(model.config) * GENERATE["max_new_tokens"], torch.float32)


@pytest.mark.parametrize("family", ["qwen2", "mistral", "gpt2"])
def test_every_familys_generate_with_the_cache_equals_generate_without(family):
    model = ode_model(family, **SETTINGS["pcformer"])
    for options in (dict(do_sample=False), dict(do_sample=True, top_k=0), dict(num_beams=3, do_sample=False)):
        cached, uncached = generate_with_and_without_cache(model, **options)
        assert torch.equal(cached.sequences, uncached.sequences), options


def test_a_static_cache_is_refused_naming_the_dynamic_one():
    model = ode_model("llama", decoder_ode_method="heun")
    with pytest.raises(ValueError, match="one key/value cache per evaluation in a dynamic cache; .* DynamicCache"):
        model.generate(TOKENS, attention_mask=LEFT_PADDED, cache_implementation="static", **GENERATE)


@pytest.mark.parametrize("field", ["residual-branch", "parallel-branch"])
@pytest.mark.parametrize("family", ["llama", "gpt2"])
def test_a_block_of_one_evaluation_decodes_with_a_static_cache_as_the_familys_layer_does(family, field):
    """Euler in one step evaluates each layer once: its block (the family's forward on the
    residual-branch field, the solve on the parallel-branch one) uses its layer of the cache
    itself, so transformers' static cache serves it as it serves the family's model."""
    model = ode_model(family, decoder_ode_method="euler", ode_field=field)
    static = model.generate(TOKENS, attention_mask=LEFT_PADDED, cache_implementation="static", **GENERATE)
    uncached = model.generate(TOKENS, attention_mask=LEFT_PADDED, use_cache=False, **GENERATE)
    assert torch.equal(static, uncached)


@pytest.mark.parametrize("family", ["llama", "mistral"])
def test_prompt_lookup_decoding_crops_the_caches_and_equals_greedy(family):
    """Prompt lookup proposes 3 tokens copied from the prompt and crops the cache back where the
    model rejects them (measured: crops by 3 positions); Mistral's window (4) is shorter than the
    repeated prompt (18), so its sliding layer records and crops its past."""
    model = ode_model(family, **SETTINGS["rk4-2-steps"])
    prompt = TOKENS[1:2].repeat(1, 2)
    options = dict(max_new_tokens=8, do_sample=False, pad_token_id=0, eos_token_id=None)
    expected = greedy_without_cache(model, prompt, torch.ones_like(prompt), options["max_new_tokens"])
    assert torch.equal(model.generate(prompt, prompt_lookup_num_tokens=3, **options), expected)
