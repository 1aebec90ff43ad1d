"""Trajectory distillation of language models: an LM teacher (fairseq's pre-norm transformer_lm
or an ODE LM such as IIET with r iterations) into an ODE LM student, in process and through
fairseq-train --task language_modeling and ``ode-seq analyze --teacher``."""

from __future__ import annotations

import json
import re

import pytest
import torch

from ode_seq.cli.analyze import main as analyze
from testkit.by_name import build_criterion, model_and_options
from testkit.in_process import run_in_process
from tests.conftest import TinyTask, build_model
from tests.lm.conftest import TINY_LM, build_lm, lm_training_args
from tests.numerics import LayerEvaluations

IIET_LM = dict(arch="ode_transformer_lm_rk4", decoder_ode_method="iie3")
DISTILLATION = dict(control_times="uniform", jasmin_weight=0.0)


def save_lm_teacher(path, task, arch, seed=0, **overrides):
    """A tiny LM ``arch`` (dropout 0) saved as fairseq does; returns the model."""
    model, args = model_and_options(arch, task, seed, **{**TINY_LM, "dropout": 0.0, **overrides})
    torch.save({"cfg": {"model": args}, "model": model.state_dict()}, path)
    return model


def lm_sample(task, lengths, seed=0):
    """A language-modeling batch: padded token rows and their next tokens."""
    generator = torch.Generator().manual_seed(seed)
    dictionary = task.target_dictionary
    pad, first = dictionary.pad(), dictionary.nspecial
    tokens = torch.full((len(lengths), max(lengths) + 1), pad)
    for i, n in enumerate(lengths):
        tokens[i, : n + 1] = torch.randint(first, len(dictionary), (n + 1,), generator=generator)
    source, target = tokens[:, :-1].clone(), tokens[:, 1:].clone()
    for i, n in enumerate(lengths):
        source[i, n:] = pad
    net_input = {"src_tokens": source, "src_lengths": torch.tensor(lengths)}
    return {"net_input": net_input, "target": target, "ntokens": int(target.ne(pad).sum())}


def iiet_lm(task, teacher, iterations):
    """The teacher's architecture and weights with ``iterations`` iterations, in eval mode."""
    student = build_lm(IIET_LM["arch"], decoder_ode_method=f"iie{iterations}", dropout=0.0)
    student.load_state_dict(teacher.state_dict())
    return student.eval()


def criterion_for(task, path, **options):
    return build_criterion(
        "ode_trajectory_distillation", task, label_smoothing=0.1, teacher_path=str(path), **{**DISTILLATION, **options}
    )


def test_an_iiet_lm_distils_into_itself_with_zero_trajectory_loss_and_not_into_fewer_iterations(tmp_path):
    task = TinyTask()
    path = tmp_path / "iiet_lm.pt"
    teacher = save_lm_teacher(path, task, **IIET_LM)
    criterion = criterion_for(task, path)
    sample = lm_sample(task, [6, 4, 7, 5])
    same = iiet_lm(task, teacher, 3)
    with LayerEvaluations(same) as evaluations, torch.no_grad():
        _, n, log = criterion(same, sample)
    assert log["trajectory"] / n <= (evaluations.count * torch.finfo(torch.float32).eps) ** 2
    assert log["decoder_trajectory"] == log["trajectory"] and "encoder_trajectory" not in log
    with torch.no_grad():
        _, n, log = criterion(iiet_lm(task, teacher, 1), sample)
    assert log["trajectory"] / n > 1e-4


def test_distillation_steps_bring_a_one_iteration_lm_towards_its_three_iteration_teacher(tmp_path):
    task = TinyTask()
    path = tmp_path / "iiet_lm.pt"
    teacher = save_lm_teacher(path, task, **IIET_LM)
    student = iiet_lm(task, teacher, 1).train()
    criterion = criterion_for(task, path, ce_start_update=100).train()
    optimizer = torch.optim.Adam(student.parameters(), lr=3e-3)
    sample = lm_sample(task, [6, 4, 7, 5])
    losses = []
    for update in range(30):
        student.set_num_updates(update)
        loss, n, log = criterion(student, sample)
        assert log["ce_weight"] == 0
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(log["trajectory"] / n)
    assert losses[-1] < 0.5 * losses[0]
    frozen = criterion.teacher.state_dict().values()
    assert all(torch.equal(a, b) for a, b in zip(teacher.state_dict().values(), frozen))


def test_a_pre_norm_transformer_lm_teaches_the_euler_lm_of_its_weights_exactly_and_a_post_norm_one_is_refused(
    tmp_path,
):
    task = TinyTask()
    path = tmp_path / "transformer_lm.pt"
    dims = dict(decoder_input_dim=32, decoder_output_dim=32)  # transformer_lm's default 512 otherwise
    teacher = save_lm_teacher(path, task, "transformer_lm", decoder_normalize_before=True, **dims)
    student = build_lm("ode_transformer_lm_euler", dropout=0.0).eval()
    student.load_state_dict(teacher.state_dict())  # the same parameter names, strict
    with LayerEvaluations(student) as evaluations, torch.no_grad():
        _, n, log = criterion_for(task, path)(student, lm_sample(task, [5, 3]))
    assert log["trajectory"] / n <= (evaluations.count * torch.finfo(torch.float32).eps) ** 2
    with torch.no_grad():
        other = build_lm("ode_transformer_lm_euler", seed=1).eval()
        _, n, log = criterion_for(task, path)(other, lm_sample(task, [5, 3]))
    assert log["trajectory"] / n > 1e-2
    post_norm = tmp_path / "post_norm_lm.pt"
    save_lm_teacher(post_norm, task, "transformer_lm", **dims)
    with pytest.raises(ValueError, match=r"post-norm Transformer \(decoder without .*--decoder-normalize-before\)$"):
        criterion_for(task, post_norm)


def test_a_teacher_of_the_other_kind_is_refused(tmp_path):
    task = TinyTask()
    path = tmp_path / "iiet_lm.pt"
    save_lm_teacher(path, task, **IIET_LM)
    translation = build_model("ode_transformer_rk4_small", task, dropout=0.0)
    with pytest.raises(ValueError, match="is a language model but the student is a translation model"):
        criterion_for(task, path)(translation, {"net_input": {}})


@pytest.fixture(scope="module")
def iiet_lm_checkpoint(lm_data, tmp_path_factory):
    """An IIET LM (3 iterations) trained for 2 epochs by fairseq-train."""
    save = tmp_path_factory.mktemp("iiet_lm")
    args = lm_training_args(
        lm_data, "ode_transformer_lm_rk4", {"decoder_ode_method": "iie3"}, ["--save-dir", str(save), "--max-epoch", "2"]
    )
    run_in_process("fairseq-train", args, check=True)
    return save / "checkpoint_last.pt"


def test_fairseq_train_distils_an_lm_into_fewer_iterations_and_analyze_measures_it(
    lm_data, iiet_lm_checkpoint, tmp_path
):
    save = tmp_path / "student"
    extra = [
        "--save-dir",
        str(save),
        "--max-epoch",
        "1",
        "--finetune-from-model",
        str(iiet_lm_checkpoint),
        "--criterion",
        "ode_trajectory_distillation",
        "--teacher-path",
        str(iiet_lm_checkpoint),
        "--control-times",
        "uniform",
        "--jasmin-weight",
        "0",
        "--ce-start-update",
        "2",
    ]
    args = lm_training_args(lm_data, "ode_transformer_lm_rk4", {"decoder_ode_method": "iie1"}, extra)
    out = run_in_process("fairseq-train", args, check=True)
    log = out.stdout + out.stderr
    trajectories = [float(x) for x in re.findall(r"\| decoder_trajectory ([\d.]+)", log)]
    assert trajectories and "encoder_trajectory" not in log
    checkpoint = save / "checkpoint_last.pt"
    report = tmp_path / "report"
    common = ["--path", str(checkpoint), "--data", str(lm_data), "--max-sentences", "4"]
    teacher = ["--teacher", str(iiet_lm_checkpoint), "--control-times", "uniform"]
    assert analyze([*common, "--out", str(report), *teacher]) == 0
    errors = json.loads((report / "report.json").read_text())["teacher_errors"]
    assert list(errors) == ["decoder"] and [e["layer"] for e in errors["decoder"]] == [1, 2]
    assert all(e["relative"] > 0 for e in errors["decoder"])
