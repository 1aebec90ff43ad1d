"""``ode-seq analyze`` on language models: trajectories and spectra of the decoder, token Lyapunov
exponents of the last position over the context, Euler error bounds; the report end to end on a
checkpoint trained by fairseq's Trainer."""

from __future__ import annotations

import json

import pytest
import torch
from fairseq import tasks
from fairseq.trainer import Trainer

from ode_seq.analysis.error_bounds import block_error_bounds
from ode_seq.analysis.lyapunov import token_lyapunov_exponents
from ode_seq.analysis.token_sensitivity import capture_calls, context_sensitivity, multistep_maps, multistep_start
from ode_seq.analysis.trajectories import record_trajectories
from ode_seq.cli.analyze import main as analyze
from ode_seq.model_inputs import language_model_pass
from testkit.in_process import parse_training_args
from tests.lm.conftest import TINY_TIME, build_lm, lm_training_args
from tests.lm.test_lm_models import random_tokens
from tests.numerics import LayerEvaluations, assert_equal_up_to_rounding


def test_trajectories_record_every_stage_of_every_decoder_block():
    model = build_lm("ode_transformer_lm_rk4").eval()
    tokens = random_tokens(3, 6)
    records = record_trajectories(model, {"src_tokens": tokens, "src_lengths": torch.tensor([6] * 3)}, pad=1)
    assert list(records) == ["decoder"] and len(records["decoder"]) == 2
    for block in records["decoder"]:
        assert (block.method, block.stages, len(block.stage_times)) == ("rk4", 4, 4)
        assert block.state_in.shape == (18,)  # one norm per token


def test_context_exponents_are_those_of_the_decoder_layers_with_the_causal_mask():
    model = build_lm("ode_transformer_lm_euler").eval()
    context = random_tokens(1, 7)[0]
    (calls,) = [capture_calls(model, language_model_pass(context[None]))["decoder"]]
    x0 = calls[0][1][0].squeeze(1)
    mask = torch.triu(torch.full((7, 7), float("-inf")), 1)

    def layer_map(layer):
        return lambda x: layer(x.unsqueeze(1), None, None, None, self_attn_mask=mask)[0].squeeze(1)

    expected = token_lyapunov_exponents([layer_map(layer) for layer in model.decoder.layers], x0, position=-1)
    result = context_sensitivity(model, context, lambda i, side: str(i))["decoder"]
    assert result.tokens == [str(int(t)) for t in context]
    assert result.result.exponents.shape == (7, 32)
    # float64 QR of the same float32 Jacobians.
    torch.testing.assert_close(torch.from_numpy(result.result.exponents), torch.from_numpy(expected.exponents))


def test_pcformer_lm_context_exponents_follow_its_augmented_state():
    model = build_lm("ode_transformer_lm_pcformer", decoder_layers=3, decoder_ode_corrector_history=1).eval()
    context = random_tokens(1, 5)[0]
    calls = capture_calls(model, language_model_pass(context[None]))["decoder"]
    y0 = calls[0][1][0].squeeze(1)
    dim = y0.shape[-1]
    with torch.no_grad():
        expected = model.decoder(context[None], features_only=True)[1]["inner_states"][-1].squeeze(1)
        with LayerEvaluations(model.decoder) as evaluations:
            z = multistep_start(y0, calls)
            for f, _ in multistep_maps(calls):
                z = f(z)
    assert z.shape == (5, 2 * dim)  # y and the m = 1 earlier first-stage value
    assert_equal_up_to_rounding(z[:, :dim], expected, evaluations.count)
    result = context_sensitivity(model, context, lambda i, side: str(i), num_exponents=4)["decoder"].result
    assert result.exponents.shape == (5, 4) and torch.isfinite(torch.from_numpy(result.exponents)).all()


def test_euler_error_bounds_of_a_non_autonomous_lm_compare_bound_and_measured_error():
    model = build_lm("ode_transformer_lm_nonauto", **TINY_TIME, decoder_ode_steps=4).eval()
    tokens = random_tokens(2, 6)
    (call,) = capture_calls(model, language_model_pass(tokens))["decoder"]
    bounds = block_error_bounds(call, tokens.ne(1).T)
    assert (bounds["method"], bounds["steps"], bounds["sentences"]) == ("euler", 4, 2)
    assert bounds["measured_error"]["max"] > 0 and bounds["bound_trajectory"]["max"] is not None


@pytest.fixture(scope="module")
def checkpoint(lm_data, tmp_path_factory):
    """An RK2 LM with learned gates after two updates, saved as fairseq-train saves it."""
    cfg = parse_training_args(lm_training_args(lm_data, "ode_transformer_lm_rk2_learned", {}))
    task = tasks.setup_task(cfg.task)
    task.load_dataset("train")
    trainer = Trainer(cfg, task, task.build_model(cfg.model), task.build_criterion(cfg.criterion))
    batches = trainer.get_train_iterator(epoch=1).next_epoch_itr(shuffle=False)
    for _ in range(2):
        trainer.train_step([next(batches)])
    path = tmp_path_factory.mktemp("lm_analysis") / "checkpoint.pt"
    trainer.consolidate_optimizer()  # as fairseq-train does before saving
    trainer.save_checkpoint(str(path), {})
    return path


def test_analyze_writes_the_lm_report(lm_data, checkpoint, tmp_path):
    out = tmp_path / "report"
    assert analyze(["--path", str(checkpoint), "--data", str(lm_data), "--out", str(out), "--max-sentences", "4"]) == 0
    report = json.loads((out / "report.json").read_text())
    first_line = (lm_data.parent / "valid.txt").read_text().splitlines()[0].split()
    assert report["sentence"] == {"from": "first line of valid"}
    assert report["lyapunov"]["decoder"]["tokens"] == ["</s>", *first_line]
    assert list(report["trajectories"]) == list(report["spectra"]["eigenvalues"]) == ["decoder"]
    assert [b["coefficients"] for b in report["trajectories"]["decoder"]] == ["gate", "gate"]
    assert list(report["euler_error_bounds"]) == ["decoder"]
    for figure in ("trajectory", "gates", "spectra_decoder", "lyapunov"):
        assert (out / report["figures"][figure]).read_bytes().startswith(b"\x89PNG")


def test_analyze_takes_a_context_and_refuses_a_target_for_an_lm(lm_data, checkpoint, tmp_path, capsys):
    common = ["--path", str(checkpoint), "--data", str(lm_data), "--max-sentences", "2"]
    assert analyze([*common, "--out", str(tmp_path / "a"), "--sentence", "w1 w2 w3"]) == 0
    report = json.loads((tmp_path / "a" / "report.json").read_text())
    assert report["lyapunov"]["decoder"]["tokens"] == ["</s>", "w1", "w2", "w3"]
    assert analyze([*common, "--out", str(tmp_path / "b"), "--sentence", "w1", "--target", "w2"]) == 2
    assert "a language model has no target" in capsys.readouterr().err
    assert not (tmp_path / "b").exists()
