"""RK-sublayer blocks (--ode-scope sublayer): one Runge–Kutta update per sublayer, each with
F = LN → sublayer → dropout, in encoder and decoder, with exact per-stage decoder caches."""

import pytest
import torch
from fairseq.modules.transformer_layer import TransformerDecoderLayerBase, TransformerEncoderLayerBase

from ode_seq.solvers import get_tableau
from tests.conftest import TinyTask, build_model, random_batch
from tests.numerics import assert_computes, assert_incremental_decoding_equals_full_forward

SUBLAYER = dict(ode_scope="sublayer")


def _rk_step(method, F, y):
    """y + Σ_i b_i k_i, k_i = F(y + Σ_j a_ij k_j): one step of size 1, written out."""
    tableau = get_tableau(method)
    ks = []
    for row in tableau.a:
        ks.append(F(y + sum(a * k for a, k in zip(row, ks))))
    return y + sum(b * k for b, k in zip(tableau.b, ks))


def _plain(layer_class, block, cfg, **kwargs):
    layer = layer_class(cfg, **kwargs).double().eval()
    layer.load_state_dict(block.state_dict(), strict=False)
    return layer


def _ffn(layer):
    return lambda z: layer.fc2(layer.activation_fn(layer.fc1(layer.final_layer_norm(z))))


@pytest.mark.numerics
@pytest.mark.parametrize("method", ["heun", "rk4"])
def test_encoder_sublayer_block_is_an_rk_update_of_attention_then_of_ffn(method):
    model = build_model("ode_transformer_rk4", TinyTask(), encoder_ode_method=method, **SUBLAYER).double().eval()
    block = model.encoder.layers[0]
    layer = _plain(TransformerEncoderLayerBase, block, block.cfg)

    def attention(z):
        u = layer.self_attn_layer_norm(z)
        return layer.self_attn(query=u, key=u, value=u, key_padding_mask=None)[0]

    y = torch.randn(5, 2, 32, dtype=torch.float64)
    with torch.no_grad():
        expected = _rk_step(method, _ffn(layer), _rk_step(method, attention, y))
        assert_computes(block, lambda: block(y, None), expected)
        assert (block(y, None) - _rk_step(method, lambda z: layer(z, None) - z, y)).abs().max() > 1e-3


@pytest.mark.numerics
def test_decoder_sublayer_block_updates_self_attention_cross_attention_and_ffn_in_turn():
    model = build_model("ode_transformer_rk4_encdec", TinyTask(), **SUBLAYER).double().eval()
    block = model.decoder.layers[0]
    layer = _plain(TransformerDecoderLayerBase, block, model.encoder.layers[0].cfg)
    memory = torch.randn(6, 2, 32, dtype=torch.float64)
    causal = torch.triu(torch.full((5, 5), float("-inf"), dtype=torch.float64), 1)

    def self_attention(z):
        u = layer.self_attn_layer_norm(z)
        return layer.self_attn(query=u, key=u, value=u, attn_mask=causal)[0]

    def cross_attention(z):
        u = layer.encoder_attn_layer_norm(z)
        return layer.encoder_attn(query=u, key=memory, value=memory, static_kv=True)[0]

    y = torch.randn(5, 2, 32, dtype=torch.float64)
    with torch.no_grad():
        expected = _rk_step("rk4", self_attention, y)
        expected = _rk_step("rk4", _ffn(layer), _rk_step("rk4", cross_attention, expected))
        assert_computes(block, lambda: block(y, encoder_out=memory, self_attn_mask=causal)[0], expected)


@pytest.mark.numerics
def test_euler_sublayer_model_is_the_pre_norm_transformer():
    task = TinyTask()
    block = build_model("ode_transformer_euler", task).double().eval()
    sublayer = build_model("ode_transformer_euler", task, seed=3, **SUBLAYER).double().eval()
    sublayer.load_state_dict(block.state_dict())
    batch = random_batch(task, [7, 4, 9])
    with torch.no_grad():
        expected = block.get_normalized_probs(block(*batch), log_probs=True)
        assert_computes(sublayer, lambda: sublayer.get_normalized_probs(sublayer(*batch), log_probs=True), expected)


@pytest.mark.numerics
@pytest.mark.parametrize(
    "arch, overrides",
    [
        ("ode_transformer_rk4_encdec", dict()),
        (
            "ode_transformer_rk4_encdec",
            dict(decoder_ode_method="heun", ode_coefficients="learned", decoder_ode_steps=2),
        ),
        (
            "ode_transformer_rk4_encdec",
            dict(decoder_ode_method="rk3", ode_coefficients="ema", decoder_relative_positions=2),
        ),
        (
            "ode_transformer_nonauto_small",
            dict(
                decoder_ode_method="heun",
                encoder_ode_method="heun",
                time_features=8,
                time_hidden_dim=16,
                time_embed_dim=4,
            ),
        ),
    ],
)
def test_incremental_decoding_equals_full_forward(arch, overrides):
    task = TinyTask()
    model = build_model(arch, task, **SUBLAYER, **overrides).double().eval()
    assert_incremental_decoding_equals_full_forward(model, task, [6, 3, 8, 5], seed=4)


def test_each_stage_keeps_one_self_attention_cache_and_cross_attention_is_computed_once():
    task = TinyTask()
    model = build_model("ode_transformer_rk4_encdec", task, **SUBLAYER).eval()
    src, lengths, prev = random_batch(task, [4, 4])
    state = {}
    with torch.no_grad():
        encoder_out = model.encoder(src, src_lengths=lengths)
        for t in range(3):
            model.decoder(prev[:, : t + 1], encoder_out=encoder_out, incremental_state=state)
    block = model.decoder.layers[0]
    states = [block.get_incremental_state(state, f"step0.stage{i}") for i in range(4)]
    self_keys = [block.self_attn._get_input_buffer(s)["prev_key"] for s in states]
    cross_keys = [block.encoder_attn._get_input_buffer(s)["prev_key"] for s in states]
    assert all(k.size(2) == 3 for k in self_keys)  # 3 positions per stage
    assert all(k is cross_keys[0] for k in cross_keys)


@pytest.mark.parametrize(
    "overrides, message",
    [
        (dict(ode_field="parallel-branch"), "--ode-scope sublayer .* --ode-field parallel-branch"),
        (dict(encoder_ode_method="dopri5"), "adaptive --encoder-ode-method dopri5 has no fixed steps"),
        (dict(scale_attn=True), "--scale-attn change"),
        (dict(cross_self_attention=True), "--cross-self-attention change"),
    ],
)
def test_invalid_sublayer_settings_fail_naming_the_option(overrides, message):
    with pytest.raises(ValueError, match=message):
        build_model("ode_transformer_rk4", TinyTask(), **SUBLAYER, **overrides)
