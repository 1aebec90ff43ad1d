"""Named architectures: published sizes, architecture defaults that options can override, every
published name selecting what it selected, and the layer kind as an option."""

import json
import os

import pytest
import torch
from fairseq.models import ARCH_MODEL_NAME_REGISTRY, ARCH_MODEL_REGISTRY

from ode_seq.training_data.model_options import KIND_MODELS
from testkit.by_name import architecture_options, build_model, random_batch
from tests.conftest import TINY, TinyTask

# Published parameter counts with a ~32K joint vocabulary and shared embeddings (En-De).
PUBLISHED = [
    ("ode_transformer_euler", 61e6, 0),
    ("ode_transformer_rk2_learned_wmt_en_de_big", 210e6, 6 * (2 * 1024 + 1)),
    ("ode_transformer_rk2_learned_rpr_wmt_en_de_big_e12", 286e6, 12 * (2 * 1024 + 1)),
]


def _real_size_model(arch: str, **overrides):
    return build_model(arch, TinyTask(vocab=32768 - 4), share_all_embeddings=True, **overrides)


@pytest.mark.parametrize("arch, published, gates", PUBLISHED)
def test_real_size_architecture_matches_published_parameter_count(arch, published, gates):
    model = _real_size_model(arch)
    count = sum(p.numel() for p in model.parameters())
    relative_positions = 0
    if "rpr" in arch:
        relative_positions = (12 + 6) * (2 * 8 + 1) * (1024 // 16)
    assert abs(count - gates - relative_positions - published) / published < 0.01, count


def test_architecture_defaults_apply_and_command_line_values_win():
    args = architecture_options("ode_transformer_rk4")
    assert (args.encoder_ode_method, args.decoder_ode_method, args.ode_coefficients) == ("rk4", "euler", "fixed")
    assert args.encoder_normalize_before and args.decoder_normalize_before
    args = architecture_options(
        "ode_transformer_rk4", encoder_ode_method="heun", ode_coefficients="learned", encoder_layers=3
    )
    assert (args.encoder_ode_method, args.ode_coefficients, args.encoder_layers) == ("heun", "learned", 3)
    args = architecture_options("ode_transformer_rk2_learned_rpr_wmt_en_de_big_e12")
    assert (args.encoder_layers, args.decoder_layers, args.encoder_embed_dim) == (12, 6, 1024)
    assert (args.encoder_relative_positions, args.dropout) == (8, 0.3)


def _parse(argv):
    from fairseq import options

    parser = options.get_training_parser()
    return options.parse_args_and_arch(parser, ["data-bin", "--user-dir", "user_dir", *argv])


def test_fairseq_command_line_keeps_architecture_defaults_unless_given():
    args = _parse(["--arch", "ode_transformer_rk4"])
    assert (args.encoder_ode_method, args.ode_field, args.encoder_layer_history) == ("rk4", "residual-branch", "none")
    args = _parse(["--arch", "ode_transformer_rk4", "--encoder-ode-method", "rk4_38", "--ode-coefficients", "free"])
    assert (args.encoder_ode_method, args.ode_coefficients) == ("rk4_38", "free")


def test_a_model_with_a_dataclass_by_name_has_the_options_of_its_fairseq_command_line():
    """fairseq's transformer_lm declares its options in a dataclass, whose defaults fairseq-train
    fills into the model's configuration."""
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf
    from omegaconf import OmegaConf

    given = dict(decoder_layers=2, decoder_embed_dim=64)
    ours = vars(architecture_options("transformer_lm", **given))
    flags = [f"--{k.replace('_', '-')}={v}" for k, v in given.items()]
    config = convert_namespace_to_omegaconf(_parse(["--task", "language_modeling", "--arch", "transformer_lm", *flags]))
    theirs = dict(OmegaConf.to_container(config.model), arch=config.model._name)
    assert len(ours) > 40 and {k: theirs.get(k) for k in ours} == ours


def test_fairseq_command_line_rejects_unknown_method_listing_choices(capsys):
    with pytest.raises(SystemExit) as exit_info:
        _parse(["--arch", "ode_transformer_rk4", "--encoder-ode-method", "rk5"])
    assert exit_info.value.code == 2
    assert "invalid choice: 'rk5'" in capsys.readouterr().err


# What every published architecture name set before the layer kind became an option, written once
# from the architecture functions of commit 43c9dbf (vars(architecture_options(name))); never
# regenerate it. Per name: the registered model, its layer kind, and the option values as
# differences from the plain architecture of its task's model ("base").
with open(os.path.join(os.path.dirname(__file__), "fixtures", "architectures.json"), encoding="utf-8") as f:
    PUBLISHED_ARCHITECTURES = json.load(f)


@pytest.mark.parametrize("arch", sorted(PUBLISHED_ARCHITECTURES["architectures"]))
def test_every_published_architecture_selects_the_model_layer_kind_and_options_it_selected(arch):
    published = PUBLISHED_ARCHITECTURES["architectures"][arch]
    model, kind = KIND_MODELS.get(published["model"], (published["model"], published["layer_kind"]))
    base = PUBLISHED_ARCHITECTURES["base"][model]
    expected = {k: v for k, v in {**base, **published["values"]}.items() if k not in published["unset"]}
    args = vars(architecture_options(arch))
    assert (ARCH_MODEL_NAME_REGISTRY[arch], args["layer_kind"]) == (model, kind)
    assert {k: args.get(k) for k in expected} == expected


def _flags(options):
    return [f"--{key.replace('_', '-')}={value}" for key, value in options.items()]


TINY_LM = dict(decoder_embed_dim=32, decoder_ffn_embed_dim=64, decoder_attention_heads=4, decoder_layers=2)
LM = ["--task", "language_modeling"]


@pytest.mark.parametrize(
    "old, new",
    [
        ("ode_transformer_nonauto", ["--arch", "ode_transformer", "--layer-kind", "time-dependent"]),
        (
            "stable_ode_transformer",
            ["--arch", "ode_transformer", "--layer-kind", "stable", "--ode-field", "parallel-branch"]
            + ["--encoder-share-group-size", "2", "--decoder-share-group-size", "2"],
        ),
        ("ode_transformer_lm_nonauto", [*LM, "--arch", "ode_transformer_lm", "--layer-kind", "time-dependent"]),
        (
            "stable_ode_transformer_lm",
            [*LM, "--arch", "ode_transformer_lm", "--layer-kind", "stable", "--ode-field", "parallel-branch"]
            + ["--decoder-share-group-size", "2"],
        ),
    ],
)
def test_layer_kind_option_builds_the_model_of_the_old_architecture_name(old, new):
    """Same parameters (names, and values from the same seed) and the same log-probabilities."""
    language_model = new[0] == LM[0]
    sizes = _flags(TINY_LM if language_model else TINY)
    old_args = [*LM, "--arch", old] if language_model else ["--arch", old]
    task = TinyTask()
    src, lengths, prev = random_batch(task, [5, 3, 6])
    results = []
    for argv in (old_args, new):
        args = _parse([*argv, *sizes])
        torch.manual_seed(0)
        model = ARCH_MODEL_REGISTRY[args.arch].build_model(args, task).eval()
        with torch.no_grad():
            out = model(prev) if language_model else model(src, lengths, prev)
            results.append((model.layer_kind, model.state_dict(), model.get_normalized_probs(out, log_probs=True)))
    (old_kind, old_state, old_out), (new_kind, new_state, new_out) = results
    assert old_kind == new_kind != "standard"
    assert list(new_state) == list(old_state)
    assert all(torch.equal(new_state[k], old_state[k]) for k in old_state)
    assert torch.equal(new_out, old_out)


def test_a_layer_kind_that_is_not_registered_is_refused_naming_the_registered_ones():
    """argparse checks --layer-kind's choices; a value that reaches the model another way (a
    checkpoint's --model-overrides, a saved config) is refused when the model is built."""
    with pytest.raises(ValueError, match=r"'bogus' is not a registered layer kind; choose one of: .*standard"):
        build_model("ode_transformer_rk4_small", TinyTask(), layer_kind="bogus")
