"""The named ODE LM architectures: fairseq's transformer_lm sizes, their ODE settings, every one
trains through fairseq-train's command line, and every ODE option is reachable by a flag."""

from __future__ import annotations

import argparse
import math

import pytest
from fairseq import tasks
from fairseq.models import ARCH_CONFIG_REGISTRY
from fairseq.models.transformer_lm import TransformerLanguageModelConfig
from fairseq.trainer import Trainer

from ode_seq.layers import ode_blocks
from ode_seq.models.lm_architectures import LM_ARCHITECTURES, LM_SETTINGS, LM_SIZES
from ode_seq.solvers import EMAWeights
from testkit.in_process import parse_training_args
from tests.lm.conftest import TINY_TIME, lm_training_args


def architecture_values(arch: str) -> dict:
    args = argparse.Namespace()
    ARCH_CONFIG_REGISTRY[arch](args)
    return vars(args)


@pytest.mark.parametrize(
    "ours, fairseqs",
    [
        ("ode_transformer_lm_euler_gpt2_tiny", "transformer_lm_gpt2_tiny"),
        ("ode_transformer_lm_rk4_gpt2_small", "transformer_lm_gpt2_small"),
        ("ode_transformer_lm_euler_wiki103", "transformer_lm_wiki103"),
        ("ode_transformer_lm_rk2_learned_wiki103", "transformer_lm_wiki103"),
    ],
)
def test_sizes_are_fairseqs_transformer_lm_presets(ours, fairseqs):
    theirs = architecture_values(fairseqs)
    mine = architecture_values(ours)
    assert {k: mine[k] for k in theirs} == theirs


def test_the_lm_size_is_transformer_lm_with_pre_norm():
    defaults = TransformerLanguageModelConfig()
    mine = architecture_values("ode_transformer_lm_euler")
    assert all(mine[k] == getattr(defaults, k) for k in LM_SIZES["lm"])
    assert mine["decoder_normalize_before"] and not defaults.decoder_normalize_before
    assert mine["decoder_input_dim"] == mine["decoder_output_dim"] == 512


# Cutoffs within the tiny vocabulary; fairseq's adaptive loss refuses PyTorch's DDP wrapper.
TINY_ADAPTIVE = "--adaptive-input-cutoff 10,20 --adaptive-softmax-cutoff 10,20 --criterion adaptive_loss".split()
TINY_ADAPTIVE += ["--ddp-backend", "legacy_ddp"]


def named_architectures():
    for arch, (setting, size) in LM_ARCHITECTURES.items():
        yield arch, LM_SETTINGS[setting], size


@pytest.mark.parametrize(
    "arch, setting, size", list(named_architectures()), ids=lambda v: v if isinstance(v, str) else ""
)
def test_every_named_architecture_trains_two_updates_through_fairseq_train(lm_data, arch, setting, size):
    options = TINY_TIME if "nonauto" in arch else {}
    extra = TINY_ADAPTIVE if size == "wiki103" else ()
    cfg = parse_training_args(lm_training_args(lm_data, arch, options, extra))
    task = tasks.setup_task(cfg.task)
    task.load_dataset("train")
    trainer = Trainer(cfg, task, task.build_model(cfg.model), task.build_criterion(cfg.criterion))
    batches = trainer.get_train_iterator(epoch=1).next_epoch_itr(shuffle=False)
    for _ in range(2):
        assert math.isfinite(float(trainer.train_step([next(batches)])["loss"]))
    blocks = ode_blocks(trainer.model.decoder)
    assert {b.solver.method for b in blocks} == {setting.get("decoder_ode_method", "euler")}
    assert {b.field_form for b in blocks} == {setting.get("ode_field", "residual-branch")}
    assert (trainer.model.decoder.adaptive_softmax is not None) == (size == "wiki103")


def test_every_ode_option_is_a_flag_of_the_lm_architectures(lm_data):
    flags = (
        "--decoder-ode-method iie3 --ode-coefficients ema --ode-scope sublayer --decoder-share-group-size 2 "
        "--decoder-ode-steps 3 --ode-checkpoint-stages --ode-check-finite"
    ).split()
    cfg = parse_training_args(lm_training_args(lm_data, "ode_transformer_lm_rk4_gpt2_tiny", {}, flags))
    (block,) = ode_blocks(tasks.setup_task(cfg.task).build_model(cfg.model).decoder)
    assert (block.solver.method, block.solver.steps, block.solver.interval) == ("iie3", 3, 2.0)
    assert isinstance(block.combiner, EMAWeights) and block.spec.scope == "sublayer" and block.spec.check_finite
    stable = ["--attention-kernel", "l2", "--spectral-norm-constraint", "--decoder-ode-method", "rk4"]
    cfg = parse_training_args(lm_training_args(lm_data, "stable_ode_transformer_lm_gpt2_tiny", {}, stable))
    (block,) = ode_blocks(tasks.setup_task(cfg.task).build_model(cfg.model).decoder)
    assert block.solver.method == "rk4" and block.self_attn.kernel == "l2"


@pytest.mark.parametrize(
    "flags, error",
    [
        (["--encoder-ode-method", "rk4"], "unrecognized arguments: --encoder-ode-method"),
        (["--decoder-ode-method", "dopri5"], "invalid choice: 'dopri5'"),
    ],
)
def test_options_an_lm_does_not_have_are_refused_by_the_command_line(lm_data, capsys, flags, error):
    with pytest.raises(SystemExit) as exit_info:
        parse_training_args(lm_training_args(lm_data, "ode_transformer_lm_rk4", {}, flags))
    assert exit_info.value.code == 2 and error in capsys.readouterr().err


def test_learned_coefficients_on_a_one_stage_lm_name_the_decoder_method(lm_data):
    cfg = parse_training_args(lm_training_args(lm_data, "ode_transformer_lm_euler", {}, ["--ode-coefficients", "free"]))
    with pytest.raises(ValueError, match=r"but --decoder-ode-method euler has one stage"):
        tasks.setup_task(cfg.task).build_model(cfg.model)
