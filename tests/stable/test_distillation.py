"""Trajectory distillation in process: teacher handling, losses, freezing, curriculum, bad input."""

import pytest
import torch

from ode_seq.models.teacher import interface_parameters, load_teacher
from testkit.by_name import build_criterion, model_and_options
from tests.conftest import TINY, TinyTask, build_model, random_batch
from tests.numerics import LayerEvaluations, assert_equal_up_to_rounding, assert_same_tensors

STUDENT = dict(encoder_ode_steps=4, decoder_ode_steps=4)


def save_teacher(path, task, seed=0, arch="transformer", **overrides):
    """A tiny fairseq transformer (pre-norm unless overridden; or model ``arch``) saved as fairseq does."""
    options = dict(encoder_normalize_before=True, decoder_normalize_before=True, dropout=0.0)
    model, args = model_and_options(arch, task, seed, **{**TINY, **options, **overrides})
    torch.save({"cfg": {"model": args}, "model": model.state_dict()}, path)
    return model


def sample_for(task, lengths, seed=0):
    src, src_lengths, prev = random_batch(task, lengths, seed=seed)
    pad, eos = task.target_dictionary.pad(), task.target_dictionary.eos()
    target = torch.full_like(prev, pad)
    for i, n in enumerate(lengths):
        target[i, :n] = prev[i, 1 : n + 1]
        target[i, n] = eos
    net_input = {"src_tokens": src, "src_lengths": src_lengths, "prev_output_tokens": prev}
    return {"net_input": net_input, "target": target, "ntokens": int(target.ne(pad).sum())}


def criterion_for(task, path, **options):
    return build_criterion("ode_trajectory_distillation", task, label_smoothing=0.1, teacher_path=str(path), **options)


@pytest.fixture
def teacher_path(tmp_path):
    path = tmp_path / "teacher.pt"
    save_teacher(path, TinyTask())
    return path


def test_criterion_keeps_the_teacher_frozen_and_outside_its_state(teacher_path):
    criterion = criterion_for(TinyTask(), teacher_path)
    assert list(criterion.parameters()) == [] and criterion.state_dict() == {}
    assert all(not p.requires_grad for p in criterion.teacher.parameters())
    criterion.train()
    assert not criterion.teacher.training


def test_distillation_steps_lower_the_trajectory_loss_and_leave_the_teacher_unchanged(teacher_path):
    task = TinyTask()
    student = build_model(
        "stable_ode_transformer_small", task, init_from_teacher=str(teacher_path), dropout=0.0, **STUDENT
    ).train()
    # The curriculum's first phase: trajectory (and JaSMin) only, interface frozen at first.
    criterion = criterion_for(task, teacher_path, freeze_interface_updates=3, ce_start_update=100).train()
    before = {n: p.clone() for n, p in criterion.teacher.named_parameters()}
    optimizer = torch.optim.Adam([p for p in student.parameters()], lr=3e-3)
    sample = sample_for(task, [6, 4, 7, 5])
    trajectory = []
    for update in range(10):
        student.set_num_updates(update)
        optimizer.zero_grad()
        loss, sample_size, log = criterion(student, sample)
        loss.backward()
        optimizer.step()
        trajectory.append(log["trajectory"].item() / sample_size)
    assert trajectory[-1] < 0.5 * trajectory[0]
    for name, p in criterion.teacher.named_parameters():
        assert torch.equal(p, before[name]) and p.grad is None, name
    assert not any("teacher" in key for key in student.state_dict())


def test_interface_stays_frozen_for_the_first_updates(teacher_path):
    task = TinyTask()
    student = build_model("stable_ode_transformer_small", task, init_from_teacher=str(teacher_path), **STUDENT).train()
    criterion = criterion_for(task, teacher_path, freeze_interface_updates=2).train()
    sample = sample_for(task, [5, 3])
    interface = {id(p) for p in interface_parameters(student)}
    for update, frozen in ((1, True), (2, False)):
        student.set_num_updates(update)
        student.zero_grad(set_to_none=True)
        criterion(student, sample)[0].backward()
        for p in student.parameters():
            expect_grad = not (frozen and id(p) in interface)
            assert (p.grad is not None) == expect_grad


def test_student_interface_is_copied_from_the_teacher_once(teacher_path):
    task = TinyTask()
    teacher = load_teacher(str(teacher_path), task)
    student = build_model("stable_ode_transformer_small", task, init_from_teacher=str(teacher_path))
    for name in (
        "encoder.embed_tokens.weight",
        "decoder.embed_tokens.weight",
        "encoder.layer_norm.weight",
        "decoder.layer_norm.bias",
        "decoder.output_projection.weight",
    ):
        assert torch.equal(student.state_dict()[name], teacher.state_dict()[name]), name
    teacher_path.unlink()  # loading a trained student (args say: done) never needs the teacher
    build_model(
        "stable_ode_transformer_small", task, init_from_teacher=str(teacher_path), initialised_from_teacher=True
    )


@pytest.mark.numerics
def test_cross_entropy_joins_after_its_start_update(teacher_path):
    task = TinyTask()
    student = build_model("stable_ode_transformer_small", task, **STUDENT).train()
    criterion = criterion_for(task, teacher_path, ce_start_update=3, ce_warmup_updates=2)
    sample = sample_for(task, [5, 6])
    for update, weight in ((2, 0.0), (3, 0.5), (4, 1.0)):
        student.set_num_updates(update)
        torch.manual_seed(0)
        loss, n, log = criterion(student, sample)
        auxiliary = log["trajectory"] + log["jasmin"]
        assert log["ce_weight"] / n == weight
        if weight == 0.0:  # the same two terms, summed in another order
            assert_equal_up_to_rounding(loss.detach(), auxiliary, 1)
        else:
            assert loss.item() > auxiliary.item()


def test_missing_teacher_path_is_a_clear_error(tmp_path):
    task = TinyTask()
    with pytest.raises(ValueError, match="pass --teacher-path"):
        build_criterion("ode_trajectory_distillation", task, label_smoothing=0.1)
    with pytest.raises(FileNotFoundError, match="teacher checkpoint .*missing.pt does not exist"):
        criterion_for(task, tmp_path / "missing.pt")


def test_post_norm_teacher_is_refused(tmp_path):
    path = tmp_path / "post_norm.pt"
    save_teacher(path, TinyTask(), encoder_normalize_before=False, decoder_normalize_before=False)
    with pytest.raises(ValueError, match="post-norm Transformer .*not states of one ODE trajectory"):
        criterion_for(TinyTask(), path)


def test_teacher_of_another_width_is_refused(tmp_path):
    task = TinyTask()
    path = tmp_path / "wide.pt"
    save_teacher(path, task, encoder_embed_dim=48, decoder_embed_dim=48)
    message = "model dimension 48 in the encoder but the student has 32"
    with pytest.raises(ValueError, match=message):
        build_model("stable_ode_transformer_small", task, init_from_teacher=str(path))
    criterion = criterion_for(task, path)
    student = build_model("stable_ode_transformer_small", task, **STUDENT)
    with pytest.raises(ValueError, match=message):
        criterion(student, sample_for(task, [4, 3]))


IIET = dict(arch="ode_transformer_rk4_encdec", encoder_ode_method="iie3", decoder_ode_method="iie3")


def iiet_student(task, teacher, iterations):
    """The teacher's architecture and weights with ``iterations`` iterations, in eval mode."""
    method = f"iie{iterations}"
    student = build_model(IIET["arch"], task, encoder_ode_method=method, decoder_ode_method=method, dropout=0.0)
    student.load_state_dict(teacher.state_dict())
    return student.eval()


def test_an_iiet_teacher_distils_into_itself_with_zero_trajectory_loss_and_not_into_fewer_iterations(tmp_path):
    task = TinyTask()
    path = tmp_path / "iiet.pt"
    teacher = save_teacher(path, task, **IIET)
    criterion = criterion_for(task, path, control_times="uniform", jasmin_weight=0.0)
    sample = sample_for(task, [6, 4, 7, 5])
    same = iiet_student(task, teacher, 3)
    with LayerEvaluations(same) as evaluations, torch.no_grad():
        _, n, log = criterion(same, sample)
    # Identical computations; at most the relative rounding of the states, squared.
    assert log["trajectory"] / n <= (evaluations.count * torch.finfo(torch.float32).eps) ** 2
    assert log["jasmin"] == 0
    with torch.no_grad():
        _, n, log = criterion(iiet_student(task, teacher, 1), sample)
    assert log["trajectory"] / n > 1e-4


def test_a_teacher_with_a_layer_history_is_refused(tmp_path):
    path = tmp_path / "dlcl.pt"
    save_teacher(path, TinyTask(), **IIET, encoder_layer_history="dense")
    with pytest.raises(ValueError, match=r"--encoder-layer-history\), so its block outputs are not states"):
        criterion_for(TinyTask(), path)


def test_teacher_of_another_dictionary_is_refused(tmp_path):
    path = tmp_path / "other_vocab.pt"
    save_teacher(path, TinyTask(vocab=40))
    with pytest.raises(ValueError, match="vocabulary of 44 entries but the data's dictionary has 34"):
        criterion_for(TinyTask(), path)


def test_student_must_be_an_ode_model_stable_for_jasmin_and_have_a_step_per_teacher_layer(teacher_path):
    task = TinyTask()
    criterion = criterion_for(task, teacher_path)
    plain = build_model("transformer", task)
    with pytest.raises(ValueError, match="needs an ODE model as student"):
        criterion(plain, sample_for(task, [4]))
    unstable = build_model("ode_transformer_euler_small", task)
    with pytest.raises(ValueError, match="JaSMin penalises the self-attention of stable .* --jasmin-weight 0"):
        criterion_for(task, teacher_path)(unstable, sample_for(task, [4]))
    coarse = build_model("stable_ode_transformer_small", task, encoder_layers=1, decoder_layers=1)
    with pytest.raises(ValueError, match="1 solver steps but the teacher has 2 layers"):
        criterion_for(task, teacher_path)(coarse, sample_for(task, [4]))


def test_student_initialised_from_another_teacher_is_refused(tmp_path, teacher_path):
    task = TinyTask()
    other = tmp_path / "other.pt"
    save_teacher(other, task, seed=1)
    student = build_model("stable_ode_transformer_small", task, init_from_teacher=str(other), **STUDENT)
    with pytest.raises(ValueError, match="initialised from .*other.pt but --teacher-path is"):
        criterion_for(task, teacher_path)(student, sample_for(task, [4]))


@pytest.mark.numerics
def test_stage_checkpointing_leaves_distillation_gradients_unchanged(teacher_path):
    task = TinyTask()
    sample = sample_for(task, [6, 4, 7])
    grads, forward = [], None
    for options in ({}, {"ode_checkpoint_stages": True}):
        student = build_model(
            "stable_ode_transformer_small",
            task,
            dropout=0.0,
            attention_dropout=0.0,
            activation_dropout=0.0,
            encoder_ode_method="rk4",
            decoder_ode_method="heun",
            encoder_ode_steps=2,
            decoder_ode_steps=2,
            **options,
        ).train()
        with LayerEvaluations(student) as evaluations:
            criterion_for(task, teacher_path)(student, sample)[0].backward()
        forward = forward or evaluations.count  # the first run's: the second recomputes stages
        grads.append({n: p.grad for n, p in student.named_parameters()})
    assert_same_tensors(grads[1], grads[0], 2 * forward)  # forward and back
