"""Parallel attention∥FFN fields, weight-shared groups over [0, k], and adaptive encoder solves."""

import logging

import numpy as np
import pytest
import torch
from fairseq.logging import metrics

from ode_seq.solvers import AdaptiveSolveError, EvaluationCounter
from testkit import device_checks
from tests.conftest import TinyTask, build_family_model, build_model, random_batch
from tests.numerics import assert_computes, assert_incremental_decoding_equals_full_forward


def _encoder_out(model, src, lengths):
    return model.encoder(src, src_lengths=lengths)["encoder_out"][0]


@pytest.mark.numerics
def test_parallel_euler_encoder_equals_hand_computed_parallel_layers():
    task = TinyTask()
    model = build_model("ode_transformer_parallel", task).double().eval()
    src, lengths, _ = random_batch(task, [5, 7])
    enc = model.encoder
    pad = src.eq(task.source_dictionary.pad())
    x, _ = enc.forward_embedding(src)
    x = (x * (1 - pad.unsqueeze(-1).type_as(x))).transpose(0, 1)
    for layer in enc.layers:
        attn, _ = layer.self_attn(*(layer.self_attn_layer_norm(x),) * 3, key_padding_mask=pad)
        ffn = layer.fc2(layer.activation_fn(layer.fc1(layer.final_layer_norm(x))))
        x = x + attn + ffn
    assert_computes(model, lambda: _encoder_out(model, src, lengths), enc.layer_norm(x))


@pytest.mark.numerics
def test_shared_group_with_euler_steps_of_one_equals_repeated_shared_layer():
    task = TinyTask()
    model = build_model("ode_transformer_euler", task, encoder_share_group_size=2).double().eval()
    assert len(model.encoder.layers) == 1
    block = model.encoder.layers[0]
    y = torch.randn(6, 3, 32, dtype=torch.float64)
    expected = y
    for _ in range(2):
        expected = expected + block.field(expected, None)
    assert_computes(block, lambda: block(y), expected)


def _shared_block(method, **overrides):
    # GELU keeps F smooth: with ReLU, F is only Lipschitz and RK4 cannot show order 4.
    model = (
        build_model(
            "ode_transformer_parallel",
            TinyTask(),
            encoder_ode_method=method,
            encoder_share_group_size=2,
            activation_fn="gelu",
            **overrides,
        )
        .double()
        .eval()
    )
    return model.encoder.layers[0]


def test_fixed_grid_group_solutions_converge_to_adaptive_solution_at_method_order():
    torch.manual_seed(0)
    y = torch.randn(5, 2, 32, dtype=torch.float64)
    adaptive = _shared_block("dopri5", ode_rtol=1e-8, ode_atol=1e-10)
    with torch.no_grad():
        reference = adaptive(y)
    for method, order in (("heun", 2), ("rk4", 4)):
        steps = np.array([2, 4, 8, 16])
        errors = []
        for n in steps:
            block = _shared_block(method, encoder_ode_steps=int(n))
            block.load_state_dict(adaptive.state_dict())
            with torch.no_grad():
                errors.append((block(y) - reference).abs().max().item())
        slope = -np.polyfit(np.log(steps), np.log(errors), 1)[0]
        assert abs(slope - order) < 0.25, (method, slope, errors)


@pytest.mark.numerics
@pytest.mark.parametrize(
    "overrides",
    [
        dict(encoder_ode_method="rk4", encoder_share_group_size=2, encoder_ode_steps=3),
        dict(encoder_ode_method="dopri5", encoder_share_group_size=2),
        dict(encoder_ode_method="bosh3", encoder_share_group_size=1, ode_rtol=1e-4),
    ],
)
def test_extra_padding_does_not_change_non_pad_outputs(overrides):
    task = TinyTask()
    model = build_model("ode_transformer_parallel", task, **overrides).double().eval()
    src, lengths, _ = random_batch(task, [5, 7, 3], seed=4)
    pad = task.source_dictionary.pad()
    padded = torch.cat([torch.full((3, 4), pad), src], dim=1)  # sources are left-padded
    keep = src.ne(pad).t()
    with torch.no_grad():
        a = _encoder_out(model, src, lengths)
        assert_computes(model, lambda: _encoder_out(model, padded, lengths)[4:][keep], a[keep])


@pytest.mark.numerics
def test_incremental_decoding_equals_full_forward_for_parallel_field_and_step_override():
    task = TinyTask()
    common = dict(decoder_ode_method="heun", decoder_share_group_size=2, ode_field="parallel-branch")
    model = build_model("ode_transformer_rk4", task, decoder_ode_steps=3, **common).double().eval()
    assert_incremental_decoding_equals_full_forward(model, task, [6, 3, 8], seed=7)
    override = build_model("ode_transformer_rk4", task, decoder_ode_steps=5, **common)
    override.load_state_dict(model.state_dict())
    assert_incremental_decoding_equals_full_forward(override.double().eval(), task, [6, 3, 8], seed=7)


@pytest.mark.parametrize(
    "overrides, message",
    [
        (
            dict(decoder_ode_method="dopri5"),
            r"--decoder-ode-method dopri5: adaptive solvers cannot run a causal decoder",
        ),
        (
            dict(encoder_ode_method="dopri5", ode_coefficients="learned"),
            r"adaptive --encoder-ode-method dopri5 has none",
        ),
        (
            dict(encoder_share_group_size=3),
            r"--encoder-share-group-size 3 must be a positive divisor of --encoder-layers 2",
        ),
        (dict(encoder_ode_steps=0), r"--encoder-ode-steps must be a positive integer"),
        (dict(encoder_ode_method="dopri5", ode_rtol=-1.0), r"--ode-rtol and --ode-atol must be > 0"),
        (
            dict(encoder_ode_step=8),
            r"encoder_ode_step is not an option of this model, so it would be ignored; "
            r"did you mean encoder_ode_steps\?",
        ),
    ],
)
def test_invalid_continuous_depth_options_are_rejected(overrides, message):
    with pytest.raises(ValueError, match=message):
        build_model("ode_transformer_parallel", TinyTask(), **overrides)


def test_adaptive_solve_in_training_fixes_dropout_masks_so_steps_stay_few():
    task = TinyTask()
    model = build_model(
        "ode_transformer_parallel",
        task,
        encoder_ode_method="dopri5",
        dropout=0.3,
        attention_dropout=0.3,
        activation_dropout=0.3,
    )
    block = model.encoder.layers[0]
    y = torch.randn(6, 2, 32)
    counts = {}
    for mode in ("eval", "train"):
        getattr(model, mode)()
        counter = EvaluationCounter()
        with torch.no_grad():
            block.solver.solve(block.vector_field(None), y, counter)
        counts[mode] = counter.count
    assert counts["train"] <= 2 * counts["eval"], counts


def test_adaptive_encoder_logs_its_function_evaluations_as_a_metric():
    task = TinyTask()
    model = build_model("ode_transformer_parallel", task, encoder_ode_method="dopri5").eval()
    evaluations = []
    for block in model.encoder.layers:
        block.fc1.register_forward_hook(lambda module, args, out: evaluations.append(1))
    src, lengths, _ = random_batch(task, [5, 7])
    with metrics.aggregate() as logged, torch.no_grad():
        model.encoder(src, src_lengths=lengths)
    assert logged["encoder_nfe"].sum == len(evaluations) > 0


@pytest.mark.parametrize("sizes", ["SMOKE_SIZES", "GPU_SIZES"])
def test_dopri5_encoder_in_float16_and_bfloat16_is_as_close_to_float32_as_rk4(sizes):
    """The error norm is taken in float32 (in float16 its squares overflowed, and torchdiffeq
    stopped with 'underflow in dt 0.0'), and so is the state (at d=512 a bfloat16 state lost the
    small steps' increments: 6 % relative error, 13 times RK4's)."""
    results = list(device_checks.adaptive_checks(getattr(device_checks, sizes), "cpu"))
    assert [r["dtype"] for r in results] == ["fp16", "bf16"]
    assert all(r["passed"] and r["evaluations"] > 0 for r in results), results


def test_dopri5_model_gets_finite_gradients_in_float16():
    """No gradient flows through the step-size control, whose error norm overflowed float16
    gradients of the source embeddings."""
    task = TinyTask()
    model = build_family_model("dopri5, parallel field, shared weights", task).half().train()
    src, lengths, prev = random_batch(task, [6, 4, 3, 8])
    logits = model(src, lengths, prev)[0]
    torch.nn.functional.cross_entropy(logits.float().flatten(0, 1), prev.roll(-1, 1).flatten()).backward()
    assert [n for n, p in model.named_parameters() if p.grad is not None and not torch.isfinite(p.grad).all()] == []


def test_a_solve_past_its_evaluation_limit_names_the_block_the_tolerances_and_the_fix():
    model = build_model(
        "ode_transformer_parallel",
        TinyTask(),
        encoder_ode_method="dopri5",
        ode_rtol=1e-12,
        ode_atol=1e-12,
        ode_max_evaluations=60,
    ).eval()
    src, lengths, prev = random_batch(TinyTask(), [5, 3])
    with (
        pytest.raises(
            AdaptiveSolveError,
            match=(
                r"encoder block 0: dopri5 with rtol 1e-12, atol 1e-12 \(torch\.float32\) stopped at t = .* "
                r"after 60 field evaluations: the limit of 60 per solve; the tolerances are too tight for this "
                r"model: loosen them \(--ode-rtol, --ode-atol"
            ),
        ),
        torch.no_grad(),
    ):
        model(src, lengths, prev)


def test_options_without_effect_are_named_in_a_warning(caplog):
    with caplog.at_level(logging.WARNING, logger="ode_seq.models.config"):
        build_model("ode_transformer_parallel", TinyTask(), encoder_ode_method="dopri5", encoder_ode_steps=4)
        build_model("ode_transformer_rk4", TinyTask(), ode_rtol=1e-6, ode_max_evaluations=50)
    assert (
        "--encoder-ode-steps 4 has no effect: adaptive --encoder-ode-method dopri5 chooses its own steps"
    ) in caplog.text
    assert "--ode-rtol, --ode-max-evaluations have no effect: only the adaptive methods" in caplog.text
