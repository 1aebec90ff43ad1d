"""ODE decoder blocks: exact incremental decoding, beam reordering, stage checkpointing."""

import pytest
import torch

from ode_seq.solvers.tableaus import TABLEAUS
from tests.conftest import (
    TinyTask,
    assert_beam_search_with_caches_equals_prefix_recomputation,
    build_model,
    random_batch,
)
from tests.numerics import (
    LayerEvaluations,
    assert_equal_up_to_rounding,
    assert_incremental_decoding_equals_full_forward,
    assert_same_tensors,
    model_precision,
)

METHOD_MODES = [(m, "fixed") for m in TABLEAUS] + [
    ("heun", "learned"),
    ("rk4", "learned"),
    ("rk3", "learned-shared"),
    ("rk4", "free"),
    ("heun", "free-ones"),
    ("heun", "ema"),
    ("rk4", "ema"),
    ("iie2", "ema"),
    ("iie3", "learned"),
]


def float64_encdec(task, seed=0, **overrides):
    """``ode_transformer_rk4_encdec`` with ``overrides`` in float64 and eval mode: the model each
    decoding equivalence below compares with itself."""
    return build_model("ode_transformer_rk4_encdec", task, seed, **overrides).double().eval()


@pytest.mark.numerics
@pytest.mark.parametrize("method, mode", METHOD_MODES)
def test_incremental_decoding_equals_full_forward(method, mode):
    task = TinyTask()
    model = float64_encdec(task, decoder_ode_method=method, encoder_ode_method=method, ode_coefficients=mode)
    assert_incremental_decoding_equals_full_forward(model, task, [6, 3, 8, 5])


@pytest.mark.numerics
@pytest.mark.parametrize(
    "overrides",
    [
        dict(decoder_relative_positions=3, encoder_relative_positions=3),
        dict(decoder_layer_history="learnable_dense", encoder_layer_history="dense"),
        dict(ode_field="whole-layer", decoder_layer_history="learnable_dense"),
    ],
)
def test_incremental_decoding_equals_full_forward_with_options(overrides):
    task = TinyTask()
    model = float64_encdec(task, **overrides)
    assert_incremental_decoding_equals_full_forward(model, task, [6, 3, 8, 5], seed=3)


def test_decoder_stage_caches_hold_one_entry_per_position_and_stage():
    task = TinyTask()
    model = build_model("ode_transformer_rk4_encdec", task).eval()
    src, lengths, prev = random_batch(task, [4, 4])
    enc = model.encoder(src, src_lengths=lengths)
    state = {}
    with torch.no_grad():
        for t in range(3):
            model.decoder(prev[:, : t + 1], encoder_out=enc, incremental_state=state)
    block = model.decoder.layers[0]
    self_keys, cross_keys = [], []
    for stage in range(4):
        stage_state = block.get_incremental_state(state, f"step0.stage{stage}")
        self_keys.append(block.self_attn._get_input_buffer(stage_state)["prev_key"])
        cross_keys.append(block.encoder_attn._get_input_buffer(stage_state)["prev_key"])
    assert all(k.size(2) == 3 for k in self_keys)  # 3 positions, not 3 x 4 stages
    assert not torch.equal(self_keys[0], self_keys[1])  # stages see different inputs
    assert all(k is cross_keys[0] for k in cross_keys)  # cross-attention K/V computed once


@pytest.mark.numerics
@pytest.mark.parametrize("method, mode", [("rk4", "fixed"), ("heun", "learned")])
def test_beam_search_with_caches_equals_prefix_recomputation(method, mode):
    task = TinyTask()
    model = float64_encdec(task, seed=5, decoder_ode_method=method, ode_coefficients=mode)
    assert_beam_search_with_caches_equals_prefix_recomputation(model, task, beam=5, max_len_b=12)


def _loss_and_grads(model, batch, seed):
    src, lengths, prev = batch
    torch.manual_seed(seed)
    out = model(src, lengths, prev)
    loss = model.get_normalized_probs(out, log_probs=True).sum()
    model.zero_grad()
    loss.backward()
    return loss.detach(), {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


@pytest.mark.numerics
@pytest.mark.parametrize(
    "checkpointing",
    [
        dict(ode_checkpoint_stages=True),
        dict(checkpoint_activations=True),
    ],
)
def test_checkpointed_model_has_same_loss_and_gradients(checkpointing):
    task = TinyTask()
    batch = random_batch(task, [6, 4, 7])
    plain = build_model("ode_transformer_rk4_encdec", task, ode_coefficients="learned").double().train()
    checked = build_model("ode_transformer_rk4_encdec", task, ode_coefficients="learned", **checkpointing)
    checked.load_state_dict(plain.state_dict())
    checked.double().train()
    with LayerEvaluations(plain) as forward:
        loss_a, grads_a = _loss_and_grads(plain, batch, seed=11)
    loss_b, grads_b = _loss_and_grads(checked, batch, seed=11)
    precision = model_precision(torch.float64)
    assert_equal_up_to_rounding(loss_b, loss_a, forward.count, precision)
    assert_same_tensors(grads_b, grads_a, 2 * forward.count, precision)  # forward and back
