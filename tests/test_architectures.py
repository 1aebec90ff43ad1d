"""Named architectures: published sizes, and architecture defaults that options can override."""

import pytest

from testkit.by_name import architecture_options, build_model
from tests.conftest import TinyTask

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
