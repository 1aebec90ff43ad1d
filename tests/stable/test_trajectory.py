"""Control times, nearest steps, the normalised trajectory loss and the solver-step recorder."""

import math

import pytest
import torch

from ode_seq.layers.recording import record_solver_steps
from ode_seq.models.criteria.trajectory_loss import (
    DistanceMean,
    control_times,
    curriculum_weight,
    layer_distance_sums,
    nearest_steps,
    relative_squared_error,
    trajectory_loss,
)
from tests.conftest import TinyTask, build_model, random_batch
from tests.numerics import assert_equal_up_to_rounding


def test_uniform_control_times_split_the_interval_evenly():
    times = control_times(torch.tensor([5.0, 1.0, 9.0]), total_time=6.0, mode="uniform")
    assert times.tolist() == pytest.approx([2.0, 4.0, 6.0])


def test_distance_control_times_follow_the_softmax_of_distances():
    distances = 30.0 * torch.log(torch.tensor([1.0, 2.0, 1.0]))  # softmax(d/30) = (1/4, 1/2, 1/4)
    times = control_times(distances, total_time=4.0, mode="distance", temperature=30.0)
    assert times.tolist() == pytest.approx([1.0, 3.0, 4.0])
    sharp = control_times(torch.tensor([0.0, 10.0, 0.0]), 3.0, "distance", temperature=1.0)
    e = math.exp(10.0)
    assert sharp.tolist() == pytest.approx([3 / (e + 2), 3 * (e + 1) / (e + 2), 3.0])
    flat = control_times(torch.tensor([1.0, 50.0, 3.0]), 3.0, "distance", temperature=1e9)
    assert flat.tolist() == pytest.approx([1.0, 2.0, 3.0])


def test_bad_control_time_options_are_errors():
    with pytest.raises(ValueError, match="uniform, distance"):
        control_times(torch.ones(2), 2.0, mode="geometric")
    with pytest.raises(ValueError, match="positive"):
        control_times(torch.ones(2), 2.0, temperature=0.0)


def test_nearest_steps_pick_the_closest_step_and_the_earlier_on_ties():
    euler_8_over_4 = [0.5 * (n + 1) for n in range(8)]
    assert nearest_steps(euler_8_over_4, torch.tensor([1.0, 3.0, 4.0])) == [1, 5, 7]
    assert nearest_steps(euler_8_over_4, torch.tensor([0.75, 2.2])) == [0, 3]


def test_layer_distances_average_over_non_padding_tokens():
    h0 = torch.zeros(2, 1, 2)
    h1 = torch.tensor([[[3.0, 4.0]], [[100.0, 0.0]]])  # second token is padding
    h2 = h1 + torch.tensor([[[0.0, 1.0]], [[0.0, 0.0]]])
    keep = torch.tensor([[True], [False]])
    sums, tokens = layer_distance_sums([h0, h1, h2], keep)
    assert sums.tolist() == pytest.approx([5.0, 1.0]) and tokens == 1
    running = DistanceMean()
    assert running.mean(fallback=(sums, tokens)).tolist() == pytest.approx([5.0, 1.0])
    running.update(torch.tensor([10.0, 2.0]), 2)
    running.update(torch.tensor([2.0, 4.0]), 2)
    assert running.mean(fallback=(sums, tokens)).tolist() == pytest.approx([3.0, 1.5])


def test_trajectory_loss_is_the_per_layer_normalised_squared_error_at_control_steps():
    keep = torch.tensor([[True], [False]])
    teacher = [
        torch.zeros(2, 1, 2),
        torch.tensor([[[2.0, 0.0]], [[9.0, 9.0]]]),
        torch.tensor([[[0.0, 4.0]], [[9.0, 9.0]]]),
    ]
    student = [
        torch.full((2, 1, 2), 7.0),
        torch.tensor([[[1.0, 0.0]], [[0.0, 0.0]]]),
        torch.full((2, 1, 2), 7.0),
        torch.tensor([[[0.0, 2.0]], [[0.0, 0.0]]]),
    ]
    assert relative_squared_error(student[1], teacher[1], keep).item() == pytest.approx(0.25)
    # control times (1, 2) on steps at (0.5, 1, 1.5, 2) → student states 1 and 3
    loss = trajectory_loss(student, [0.5, 1.0, 1.5, 2.0], teacher, keep, torch.tensor([1.0, 2.0]))
    assert loss.item() == pytest.approx((1 / 4 + 4 / 16) / 2)


def test_curriculum_weight_is_zero_then_ramps_linearly():
    weights = [curriculum_weight(u, start=2, warmup=4, final=0.8) for u in range(8)]
    assert weights == pytest.approx([0.0, 0.0, 0.2, 0.4, 0.6, 0.8, 0.8, 0.8])
    assert curriculum_weight(0, start=0, warmup=0, final=1.0) == 1.0


@pytest.mark.numerics
@pytest.mark.parametrize("method", ["euler", "rk4"])
def test_recorder_returns_every_step_state_with_its_time(method):
    task = TinyTask()
    model = build_model("stable_ode_transformer_small", task, encoder_ode_method=method, encoder_ode_steps=4).eval()
    src, lengths, _ = random_batch(task, [5, 3])
    block = model.encoder.layers[0]
    with torch.no_grad(), record_solver_steps(model.encoder) as record:
        out = model.encoder(src, src_lengths=lengths, return_all_hiddens=True)
    assert record.times == pytest.approx([0.5, 1.0, 1.5, 2.0]) and record.total_steps == 4
    assert record.clock == 2.0 and len(record.attention) == 4 * block.solver.tableau.stages
    assert torch.equal(record.states[-1], out["encoder_states"][-1])  # the same tensor's values
    if method == "euler":
        y0, mask = out["encoder_states"][0], out["encoder_padding_mask"][0]
        with torch.no_grad():
            y1 = y0 + 0.5 * block.field(y0, mask)
        assert_equal_up_to_rounding(record.states[0], y1, 1)
    recorded = (len(record.states), len(record.attention))
    with torch.no_grad():
        model.encoder(src, src_lengths=lengths)
    assert (len(record.states), len(record.attention)) == recorded  # recording has stopped


def test_recorder_refuses_adaptive_blocks():
    model = build_model("ode_transformer_parallel_shared_dopri5", TinyTask(), encoder_share_group_size=2)
    with pytest.raises(ValueError, match="fixed grid"):
        with record_solver_steps(model.encoder):
            pass


def test_recorder_refuses_blocks_under_activation_checkpointing():
    model = build_model("stable_ode_transformer_small", TinyTask(), checkpoint_activations=True)
    with pytest.raises(ValueError, match="use --ode-checkpoint-stages"):
        with record_solver_steps(model.decoder):
            pass


def test_recorder_chains_the_times_of_consecutive_blocks():
    task = TinyTask()
    model = build_model("stable_ode_transformer_small", task, encoder_share_group_size=1, encoder_ode_steps=2).eval()
    src, lengths, _ = random_batch(task, [4, 6])
    with torch.no_grad(), record_solver_steps(model.encoder) as record:
        out = model.encoder(src, src_lengths=lengths, return_all_hiddens=True)
    assert record.times == pytest.approx([0.5, 1.0, 1.5, 2.0]) and record.total_steps == 4
    assert torch.equal(record.states[1], out["encoder_states"][1])  # the same tensors' values
    assert torch.equal(record.states[3], out["encoder_states"][2])
    assert sorted({step for step, _ in record.attention}) == [0, 1, 2, 3]
