"""ODE language models that are plain pre-norm Transformers export to fairseq's ``transformer_lm``
with the same log-probabilities (the non-autonomous model at any step count); the others are
refused naming the option that prevents it."""

from __future__ import annotations

import pytest
import torch
from fairseq.models import build_model
from omegaconf import OmegaConf

from ode_seq.export import NotRepresentable, plain_transformer
from tests.conftest import TinyTask
from tests.export.models import model_and_args
from tests.lm.conftest import TINY_LM, TINY_TIME
from tests.lm.test_lm_models import log_probs, random_tokens
from tests.numerics import assert_computes


def exported_transformer_lm(model, args, task):
    plain = plain_transformer(model, args)
    transformer_lm = build_model(OmegaConf.create(plain.config), task, from_checkpoint=True).eval()
    transformer_lm.load_state_dict(plain.state_dict)
    return transformer_lm, plain


@pytest.mark.numerics
@pytest.mark.parametrize(
    "arch, options, layers",
    [
        ("ode_transformer_lm_euler", {}, 2),
        # one layer shared by a group of 2 over [0, 2] in 2 steps: that layer twice
        ("ode_transformer_lm_euler", dict(decoder_share_group_size=2), 2),
        # RK-sublayer Euler at step size 2/3: layers with output projections scaled by 2/3
        ("ode_transformer_lm_euler", dict(ode_scope="sublayer", decoder_share_group_size=2, decoder_ode_steps=3), 3),
        ("ode_transformer_lm_nonauto", TINY_TIME, 2),
        ("ode_transformer_lm_nonauto", dict(TINY_TIME, decoder_ode_steps=3), 3),
        ("ode_transformer_lm_nonauto", dict(TINY_TIME, decoder_ode_steps=7), 7),
        ("ode_transformer_lm_nonauto_gpt2_tiny", dict(TINY_TIME, decoder_ode_steps=5), 5),
    ],
)
def test_exported_transformer_lm_gives_the_log_probabilities_of_the_model(arch, options, layers):
    task = TinyTask()
    model, args = model_and_args(arch, task, **{**TINY_LM, **options})
    if hasattr(model.decoder.layers[0], "theta"):  # make θ(τ) depend on τ
        with torch.no_grad():
            for p in model.decoder.layers[0].theta.parameters():
                p.add_(0.05 * torch.randn_like(p))
    transformer_lm, plain = exported_transformer_lm(model, args, task)
    assert plain.layers == (0, layers) and plain.config["_name"] == "transformer_lm"
    assert plain.config["decoder_normalize_before"] is True
    assert not [k for k in plain.config if "ode_" in k or k.startswith("time_")]
    tokens = random_tokens(3, 8)
    expected = log_probs(model, tokens)
    assert_computes(transformer_lm, lambda: log_probs(transformer_lm, tokens), expected)


@pytest.mark.parametrize(
    "arch, options, refusal",
    [
        ("ode_transformer_lm_rk2_learned", {}, r"heun \(--decoder-ode-method\)"),
        ("ode_transformer_lm_parallel", {}, r"--ode-field parallel-branch"),
        ("ode_transformer_lm_nonauto", dict(TINY_TIME, ode_field="parallel-branch"), r"--ode-field parallel-branch"),
        ("ode_transformer_lm_euler", dict(decoder_relative_positions=4), r"--decoder-relative-positions 4"),
        ("stable_ode_transformer_lm", {}, r"stable layers"),
    ],
)
def test_language_models_that_are_not_transformers_are_refused_naming_the_option(arch, options, refusal):
    model, args = model_and_args(arch, TinyTask(), **{**TINY_LM, **options})
    with pytest.raises(NotRepresentable, match=refusal):
        plain_transformer(model, args)
