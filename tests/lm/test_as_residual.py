"""``ode-seq as-residual``: a trained ODE language model's layers as the residual model of the same
layers (train with an ODE block, serve at residual cost), which fairseq loads, evaluates once per
layer, fine-tunes and exports as a plain transformer_lm."""

from __future__ import annotations

import argparse
import re

import pytest
import torch
from fairseq import checkpoint_utils

from ode_seq.checkpoint_files import load_checkpoint
from ode_seq.cli.as_residual import main as as_residual
from ode_seq.export import plain_transformer
from ode_seq.export.residual import residual_state
from testkit.in_process import run_in_process
from tests.lm.conftest import lm_training_args
from tests.numerics import LayerEvaluations


def train(data, save, arch, *extra) -> None:
    out = run_in_process(
        "fairseq-train", lm_training_args(data, arch, {}, ["--save-dir", str(save), *extra]), check=True
    )
    assert re.search(r"done training", out.stdout + out.stderr)


@pytest.fixture(scope="module")
def pcformer(lm_data, tmp_path_factory):
    """A tiny PCformer LM (Heun predictor with EMA weights, multistep corrector), 4 updates."""
    save = tmp_path_factory.mktemp("pcformer")
    train(lm_data, save, "ode_transformer_lm_pcformer", "--decoder-ode-method", "heun", "--max-update", "4")
    return save / "checkpoint_last.pt"


def test_the_residual_model_keeps_every_layer_parameter_and_evaluates_each_layer_once(pcformer, tmp_path, capsys):
    output = tmp_path / "residual.pt"
    assert as_residual(["--path", str(pcformer), "--output", str(output)]) == 0
    printed = capsys.readouterr().out
    source, converted = load_checkpoint(str(pcformer)), load_checkpoint(str(output))
    dropped = sorted(set(source["model"]) - set(converted["model"]))
    assert dropped and all(".layers." in name and ".self_attn." not in name for name in dropped)
    assert f"dropped {len(dropped)} parameters only the ODE method has: {', '.join(dropped)}" in printed
    assert all(torch.equal(value, source["model"][name]) for name, value in converted["model"].items())
    options = converted["cfg"]["model"]
    assert (options.decoder_ode_method, options.decoder_ode_corrector, options.ode_coefficients) == (
        "euler",
        "none",
        "fixed",
    )
    assert converted["last_optimizer_state"] is None
    recorded = converted["task_state"]["model_options"]  # the record of its identity: the residual model's
    assert (recorded["decoder_ode_method"], recorded["decoder_ode_corrector"]) == ("euler", "none")

    (model,), cfg, _ = checkpoint_utils.load_model_ensemble_and_task([str(output)])
    tokens = torch.randint(4, 20, (2, 9))
    with LayerEvaluations(model) as counted:
        model.eval()(tokens)
    assert counted.count == cfg.model.decoder_layers == 2  # PCformer-Heun: 3 per layer
    assert plain_transformer(model, cfg.model).layers == (0, 2)  # a plain transformer_lm, exportable


def test_the_residual_model_fine_tunes_as_ode_transformer_lm_euler(pcformer, lm_data, tmp_path):
    residual = tmp_path / "residual.pt"
    assert as_residual(["--path", str(pcformer), "--output", str(residual)]) == 0
    train(
        lm_data,
        tmp_path / "tuned",
        "ode_transformer_lm_euler",
        "--max-update",
        "2",
        "--finetune-from-model",
        str(residual),
    )
    tuned = load_checkpoint(str(tmp_path / "tuned" / "checkpoint_last.pt"))
    assert tuned["cfg"]["model"].decoder_ode_method == "euler"
    assert set(tuned["model"]) == set(load_checkpoint(str(residual))["model"])


def test_a_checkpoint_without_the_layers_of_the_residual_model_is_refused_naming_the_parameter() -> None:
    state = {"cfg": {"model": argparse.Namespace(decoder_ode_method="rk4")}, "model": {"w": torch.zeros(2)}}
    build = lambda options: torch.nn.Linear(2, 3)  # noqa: E731  (a model whose parameters the checkpoint lacks)
    with pytest.raises(ValueError, match=r"needs weight \(3, 2\), which the checkpoint lacks"):
        residual_state(state, build)


def test_a_missing_checkpoint_or_the_same_output_is_a_usage_error(pcformer, tmp_path, capsys) -> None:
    assert as_residual(["--path", str(tmp_path / "none.pt"), "--output", str(tmp_path / "out.pt")]) == 2
    assert "--path" in capsys.readouterr().err
    assert as_residual(["--path", str(pcformer), "--output", str(pcformer)]) == 2
    assert "is the checkpoint to convert; write to another file" in capsys.readouterr().err
