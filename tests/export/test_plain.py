"""Which ODE models are plain pre-norm Transformers: the exported fairseq ``transformer`` gives the
same log-probabilities, and every other model is refused naming the option that prevents it."""

import pytest

from ode_seq.export import NotRepresentable, plain_transformer
from testkit.by_name import build_model
from tests.conftest import TinyTask, random_batch
from tests.export.models import log_probs, model_and_args
from tests.numerics import assert_computes


def _export(model, args, task):
    plain = plain_transformer(model, args)
    options = dict(plain.config)
    transformer = build_model(options.pop("arch"), task, **options).to(next(model.parameters()).dtype).eval()
    transformer.load_state_dict(plain.state_dict)
    return transformer, plain


@pytest.mark.numerics
@pytest.mark.parametrize(
    "arch, options, layers",
    [
        ("ode_transformer_euler_small", {}, (2, 2)),
        # a weight-shared group of 2 layers over [0, 2] in 2 steps: its layer twice
        ("ode_transformer_euler_small", dict(encoder_share_group_size=2, decoder_share_group_size=2), (2, 2)),
        # RK-sublayer Euler at step size 2/3: layers with output projections scaled by 2/3
        (
            "ode_transformer_euler_small",
            dict(ode_scope="sublayer", encoder_share_group_size=2, encoder_ode_steps=3),
            (3, 2),
        ),
        (
            "ode_transformer_nonauto_small",
            dict(time_features=8, time_hidden_dim=16, time_embed_dim=4, encoder_ode_steps=3, decoder_ode_steps=5),
            (3, 5),
        ),
        ("transformer", dict(encoder_normalize_before=True, decoder_normalize_before=True), (2, 2)),
    ],
)
def test_exported_transformer_gives_the_log_probabilities_of_the_model(arch, options, layers):
    task = TinyTask()
    model, args = model_and_args(arch, task, **options)
    transformer, plain = _export(model.double(), args, task)
    assert plain.layers == layers and plain.config["arch"] == "transformer"
    assert not [k for k in plain.config if "ode_" in k or k.startswith("time_")]
    batch = random_batch(task, [6, 4, 7])
    assert_computes(transformer, lambda: log_probs(transformer, batch), log_probs(model, batch))


@pytest.mark.parametrize(
    "arch, options, refusal",
    [
        ("ode_transformer_rk2_learned_small", {}, r"heun \(--encoder-ode-method\)"),
        ("ode_transformer_euler_small", dict(encoder_relative_positions=4), r"--encoder-relative-positions 4"),
        ("ode_transformer_euler_small", dict(decoder_layer_history="dense"), r"--decoder-layer-history"),
        ("ode_transformer_euler_small", dict(ode_field="parallel-branch"), r"--ode-field parallel-branch"),
        (
            "ode_transformer_euler_small",
            dict(encoder_share_group_size=2, encoder_ode_steps=4),
            r"size 0\.5 \(--encoder-ode-steps 4 over --encoder-share-group-size 2\).*'encoder_ode_steps': 2",
        ),
        ("stable_ode_transformer_small", {}, r"stable layers"),
        ("pcformer_small", dict(encoder_ode_method="euler", ode_coefficients="fixed"), r"--encoder-ode-corrector"),
    ],
)
def test_models_that_are_not_transformers_are_refused_naming_the_option(arch, options, refusal):
    task = TinyTask()
    model, args = model_and_args(arch, task, **options)
    with pytest.raises(NotRepresentable, match=refusal):
        plain_transformer(model, args)
