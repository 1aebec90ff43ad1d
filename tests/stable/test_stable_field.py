"""The stable field: CenterNorm, spectral-norm-1 projections, L2 attention, bias-free blocks."""

import math

import pytest
import torch
from torch import nn

from ode_seq.layers import DecoderBlock, EncoderBlock
from ode_seq.layers.stable import CenterNorm, StableLayer, StableMultiheadAttention, spectral_init_
from tests.conftest import TinyTask, build_model, random_batch
from tests.numerics import assert_equal_up_to_rounding, assert_rows_sum_to_one


def random_center_norm(width: int, seed: int, bias: bool) -> CenterNorm:
    """CenterNorm(width) with N(0, 1) weights (and biases, with ``bias``) drawn after torch.manual_seed(seed)."""
    torch.manual_seed(seed)
    norm = CenterNorm(width)
    with torch.no_grad():
        norm.weight.copy_(torch.randn(width))
        if bias:
            norm.bias.copy_(torch.randn(width))
    return norm


@pytest.mark.numerics
def test_center_norm_equals_its_formula():
    norm = random_center_norm(6, seed=0, bias=True)
    x = torch.randn(3, 4, 6)
    w, b, z = norm.weight.double(), norm.bias.double(), x.double()  # the formula exactly, or nearly
    expected = w * (6 / 5) * (z - z.mean(-1, keepdim=True)) + b
    assert_equal_up_to_rounding(norm(x).double(), expected, 1, precision=torch.float32)
    row = torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0, 9.0])  # mean 4
    plain = CenterNorm(6)
    expected = torch.tensor([-3.6, -2.4, -1.2, 0.0, 1.2, 6.0], dtype=torch.float64)
    assert_equal_up_to_rounding(plain(row).double(), expected, 1, precision=torch.float32)


@pytest.mark.numerics
def test_center_norm_is_affine_and_ignores_constant_shifts():
    norm = random_center_norm(8, seed=1, bias=False)
    x, y = torch.randn(5, 8), torch.randn(5, 8)
    assert_equal_up_to_rounding(norm(0.3 * x + 0.7 * y), 0.3 * norm(x) + 0.7 * norm(y), 2)  # two norms
    # x + 11 rounds at the size of 11, and the norm scales that by |w|·8/7
    shifted = norm.weight.abs() * (8 / 7) * (x.abs() + 11.0)
    assert_equal_up_to_rounding(norm(x + 11.0), norm(x), 1, magnitude=shifted.detach())
    # No division by the standard deviation: scaling the centred input scales the output.
    assert_equal_up_to_rounding(norm(5 * x) - norm.bias, 5 * (norm(x) - norm.bias), 1)


def test_center_norm_needs_two_features():
    with pytest.raises(ValueError, match="at least 2"):
        CenterNorm(1)


@pytest.mark.numerics
def test_spectral_init_is_xavier_divided_by_the_top_singular_value():
    reference, linear = nn.Linear(48, 20), nn.Linear(48, 20)
    torch.manual_seed(3)
    nn.init.xavier_uniform_(reference.weight)
    torch.manual_seed(3)
    spectral_init_(linear)
    sigma = torch.linalg.svdvals(reference.weight.detach())[0]
    assert_equal_up_to_rounding(linear.weight.detach(), reference.weight.detach() / sigma, 1)
    singular = torch.linalg.svdvals(linear.weight.detach())
    svd = 48 * torch.finfo(torch.float32).eps  # LAPACK's singular values: within n·ε·σ_max (n = 48 columns)
    assert abs(singular[0].item() - 1.0) <= svd and singular.max().item() <= 1 + svd
    assert torch.count_nonzero(linear.bias) == 0


def _block_linears(model):
    return [
        m
        for block in list(model.encoder.layers) + list(model.decoder.layers)
        for m in block.modules()
        if isinstance(m, nn.Linear)
    ]


def test_stable_blocks_have_center_norms_and_bias_free_unit_norm_projections():
    model = build_model("stable_ode_transformer_small", TinyTask())
    blocks = list(model.encoder.layers) + list(model.decoder.layers)
    assert all(isinstance(b, StableLayer) for b in blocks)
    assert isinstance(blocks[0], EncoderBlock) and isinstance(blocks[1], DecoderBlock)
    norms = [m for b in blocks for m in b.modules() if isinstance(m, (nn.LayerNorm, CenterNorm))]
    assert len(norms) == 5 and all(isinstance(n, CenterNorm) for n in norms)
    linears = _block_linears(model)
    assert len(linears) == 4 + 8 + 2 * 2  # attention projections and FFN of both blocks
    for linear in linears:
        assert linear.bias is None
        svd = max(linear.weight.shape) * torch.finfo(torch.float32).eps  # LAPACK: within n·ε·σ_max
        assert abs(torch.linalg.matrix_norm(linear.weight.detach(), ord=2).item() - 1.0) <= svd


def test_spectral_norm_constraint_brings_trained_weights_back_to_unit_norm():
    task = TinyTask()
    model = build_model("stable_ode_transformer_small", task, spectral_norm_constraint=True)
    fc1 = model.encoder.layers[0].fc1
    with torch.no_grad():
        fc1.parametrizations.weight.original.mul_(4.0).add_(0.1)
    src, lengths, prev = random_batch(task, [5, 3])
    model.train()
    with torch.no_grad():
        for _ in range(30):  # each training forward runs one power iteration per weight access
            model(src, lengths, prev)
    model.eval()
    for linear in _block_linears(model):
        assert abs(torch.linalg.matrix_norm(linear.weight.detach(), ord=2).item() - 1.0) < 1e-3


def _attention_inputs(kernel, seed=0, dtype=torch.float32):
    torch.manual_seed(seed)
    attention = StableMultiheadAttention(8, 2, kernel=kernel, self_attention=True).to(dtype).eval()
    x = torch.randn(4, 3, 8, dtype=dtype)  # (T, B, C)
    padding = torch.tensor([[False] * 4, [True, False, False, False], [False] * 4])
    return attention, x, padding


@pytest.mark.numerics
def test_l2_attention_logits_are_negative_squared_distances_over_sqrt_d():
    attention, x, padding = _attention_inputs("l2", dtype=torch.float64)
    logits, _ = attention(x, x, x, key_padding_mask=padding, before_softmax=True)
    q = attention.q_proj(x).view(4, 3 * 2, 4).transpose(0, 1)
    k = attention.k_proj(x).view(4, 3 * 2, 4).transpose(0, 1)
    expected = -torch.cdist(q, k).pow(2) / math.sqrt(4)
    expected = expected.view(3, 2, 4, 4).masked_fill(padding[:, None, None, :], float("-inf")).view(6, 4, 4)
    # ‖q − k‖² may be computed as ‖q‖² + ‖k‖² − 2 q·k: its rounding is relative to ‖q‖² + ‖k‖²
    magnitude = (q.pow(2).sum(-1)[:, :, None] + k.pow(2).sum(-1)[:, None, :]) / math.sqrt(4)
    assert_equal_up_to_rounding(logits, expected, 1, magnitude=magnitude.detach())


@pytest.mark.numerics
def test_attention_records_per_head_probabilities_and_available_keys():
    attention, x, padding = _attention_inputs("dot", seed=2)
    recorded = []
    handle = attention.register_probability_hook(recorded.append)
    future = torch.triu(torch.full((4, 4), float("-inf")), 1)
    attention(x, x, x, key_padding_mask=padding, attn_mask=future)
    handle.remove()
    attention(x, x, x, key_padding_mask=padding, attn_mask=future)
    (record,) = recorded
    assert record.probs.shape == (3, 2, 4, 4)
    assert_rows_sum_to_one(record.probs[1, :, 1:])
    assert record.query_padding_mask is padding
    assert record.available_keys[0, 0].tolist() == [1, 2, 3, 4]
    assert record.available_keys[1, 1].tolist() == [0, 1, 2, 3]  # key 0 is padding


def test_unknown_attention_kernel_is_refused():
    with pytest.raises(ValueError, match="choose one of: dot, l2"):
        StableMultiheadAttention(8, 2, kernel="cosine")
    with pytest.raises(ValueError, match="--attention-kernel 'cosine'"):
        build_model("stable_ode_transformer_small", TinyTask(), attention_kernel="cosine")


def test_stable_blocks_refuse_relative_positions():
    with pytest.raises(ValueError, match="relative position"):
        build_model("stable_ode_transformer_small", TinyTask(), encoder_relative_positions=4)
