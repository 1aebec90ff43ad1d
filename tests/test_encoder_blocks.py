"""ODE encoder blocks: Euler is fairseq's pre-norm Transformer; RK blocks match their formulas."""

import pytest
import torch
from fairseq.modules.layer_drop import LayerDropModuleList
from fairseq.modules.transformer_layer import TransformerEncoderLayerBase

from tests.conftest import TinyTask, build_model, random_batch
from tests.numerics import assert_computes, assert_equal_up_to_rounding, model_precision


def _encode(model, src, lengths):
    return model.encoder(src, src_lengths=lengths)["encoder_out"][0]


def _log_probs(model, batch):
    src, lengths, prev = batch
    out = model(src, lengths, prev)
    return model.get_normalized_probs(out, log_probs=True)


@pytest.mark.numerics
def test_euler_model_equals_fairseq_prenorm_transformer_with_same_weights(task):
    vanilla = build_model("transformer", task, encoder_normalize_before=True, decoder_normalize_before=True)
    ode = build_model("ode_transformer_euler", task, seed=1)
    ode.load_state_dict(vanilla.state_dict())  # identical parameter names, strict
    vanilla, ode = vanilla.double().eval(), ode.double().eval()
    batch = random_batch(task, [7, 4, 9])
    assert_computes(ode, lambda: _log_probs(ode, batch), _log_probs(vanilla, batch))


def _block_and_branch(arch, **overrides):
    """A float64 block and its layer's branch G(z) = layer(z) − z, as fairseq's own layer."""
    model = build_model(arch, TinyTask(), **overrides).double().eval()
    block = model.encoder.layers[0]
    layer = TransformerEncoderLayerBase(block.cfg).double().eval()
    missing = layer.load_state_dict(block.state_dict(), strict=False)
    assert not missing.missing_keys
    return block, (lambda z: layer(z, encoder_padding_mask=None) - z)


def _state():
    return torch.randn(5, 2, 32, dtype=torch.float64)


@pytest.mark.numerics
def test_rk2_block_equals_heun_formula():
    block, G = _block_and_branch("ode_transformer_rk2")
    y = _state()
    k1 = G(y)
    k2 = G(y + k1)
    assert_computes(block, lambda: block(y), y + (k1 + k2) / 2)


@pytest.mark.numerics
def test_rk4_block_equals_classical_rk4_formula():
    block, G = _block_and_branch("ode_transformer_rk4")
    y = _state()
    k1 = G(y)
    k2 = G(y + k1 / 2)
    k3 = G(y + k2 / 2)
    k4 = G(y + k3)
    assert_computes(block, lambda: block(y), y + (k1 + 2 * k2 + 2 * k3 + k4) / 6)


@pytest.mark.numerics
def test_learned_gamma_block_equals_paper_gate_formula():
    block, G = _block_and_branch("ode_transformer_rk2_learned")
    with torch.no_grad():
        block.combiner.proj.bias.fill_(0.3)
    y = _state()
    k1 = G(y)
    k2 = G(y + k1)
    W, b = block.combiner.proj.weight, block.combiner.proj.bias
    g = torch.sigmoid(torch.cat([k1, k2], dim=-1) @ W.t() + b)
    assert_computes(block, lambda: block(y), y + g * k1 + (1 - g) * k2)


@pytest.mark.numerics
def test_free_ones_block_is_sum_of_stages_at_init():
    block, G = _block_and_branch("ode_transformer_rk2", ode_coefficients="free-ones")
    y = _state()
    k1 = G(y)
    k2 = G(y + k1)
    assert_computes(block, lambda: block(y), y + k1 + k2)


@pytest.mark.numerics
def test_iterated_implicit_euler_block_equals_iiet_fixed_point_formula():
    block, G = _block_and_branch("ode_transformer_rk2", encoder_ode_method="iie2")
    y = _state()
    x = y + G(y)
    for _ in range(2):
        x = y + G(x)
    assert_computes(block, lambda: block(y), x)


@pytest.mark.numerics
@pytest.mark.parametrize("method, stages", [("heun", 2), ("rk4", 4)])
def test_ema_block_equals_pcformer_ema_weights_formula(method, stages):
    block, G = _block_and_branch("ode_transformer_rk2", encoder_ode_method=method, ode_coefficients="ema")
    assert block.combiner.beta.item() == 0.5
    with torch.no_grad():
        block.combiner.beta.fill_(0.3)
    y = _state()
    a = block.solver.tableau.a
    ks = []
    for i in range(stages):
        ks.append(G(y + sum(a_ij * k for a_ij, k in zip(a[i], ks))))
    beta = 0.3
    expected = y + sum(beta * (1 - beta) ** (stages - 1 - i) * k for i, k in enumerate(ks))
    assert_computes(block, lambda: block(y), expected)


def test_ema_weights_at_initialisation_are_pcformers():
    block, _ = _block_and_branch("ode_transformer_rk4", ode_coefficients="ema")
    assert torch.equal(block.combiner.weights([]), torch.tensor([1 / 16, 1 / 8, 1 / 4, 1 / 2], dtype=torch.float64))
    assert [n for n, _ in block.combiner.named_parameters()] == ["beta"]


@pytest.mark.numerics
def test_whole_layer_field_feeds_residual_into_every_stage():
    block, G = _block_and_branch("ode_transformer_rk2", ode_field="whole-layer")
    L = lambda z: z + G(z)  # noqa: E731
    y = _state()
    k1 = L(y)
    k2 = L(y + k1)
    assert_computes(block, lambda: block(y), y + (k1 + k2) / 2)


def _count(model):
    return sum(p.numel() for p in model.parameters())


def test_parameter_counts_equal_vanilla_plus_gates(task):
    d, layers = 32, 2
    euler = _count(build_model("ode_transformer_euler", task))
    assert _count(build_model("ode_transformer_rk4", task)) == euler
    assert _count(build_model("ode_transformer_rk4_encdec", task)) == euler
    assert _count(build_model("ode_transformer_rk2_learned", task)) == euler + layers * (2 * d + 1)
    shared = build_model("ode_transformer_rk2", task, ode_coefficients="learned-shared")
    assert _count(shared) == euler + (2 * d + 1)
    rk4_gate = build_model("ode_transformer_rk4", task, ode_coefficients="learned")
    assert _count(rk4_gate) == euler + layers * 3 * (4 * d + 1)
    assert _count(build_model("ode_transformer_rk4", task, ode_coefficients="free")) == euler + layers * 4


def test_vanilla_checkpoint_initialises_an_rk_model(task):
    vanilla = build_model("transformer", task, encoder_normalize_before=True, decoder_normalize_before=True)
    rk = build_model("ode_transformer_rk2_learned", task)
    result = rk.load_state_dict(vanilla.state_dict(), strict=False)
    assert not result.unexpected_keys
    assert sorted(result.missing_keys) == [
        f"encoder.layers.{i}.combiner.proj.{p}" for i in range(2) for p in ("bias", "weight")
    ]


@pytest.mark.parametrize(
    "overrides, message",
    [
        (dict(encoder_ode_method="rk5"), r"--encoder-ode-method 'rk5' is not valid; choose one of: euler"),
        (dict(ode_coefficients="gated"), r"--ode-coefficients 'gated' is not valid; choose one of: fixed"),
        (dict(ode_field="sideways"), r"--ode-field 'sideways' is not valid"),
        (
            dict(encoder_normalize_before=False),
            r"--ode-field residual-branch needs pre-norm encoder layers: pass --encoder-normalize-before",
        ),
        (dict(encoder_ode_method="euler", ode_coefficients="learned"), r"have one stage; choose a method such as heun"),
        (dict(encoder_relative_positions=-2), r"--encoder-relative-positions must be >= 0"),
        (dict(encoder_layer_history="sparse"), r"--encoder-layer-history 'sparse' is not valid"),
        (dict(ode_checkpoint_stages=True, checkpoint_activations=True), r"not both"),
        (
            dict(encoder_layerdrop=0.2, encoder_layer_history="dense"),
            r"--encoder-layerdrop 0.2 drops blocks, but with --encoder-layer-history dense every "
            r"block's output is a history state that later blocks read: pass --encoder-layerdrop 0 "
            r"or --encoder-layer-history none",
        ),
    ],
)
def test_invalid_options_fail_at_model_build_naming_option_and_values(overrides, message):
    with pytest.raises(ValueError, match=message):
        build_model("ode_transformer_rk4", TinyTask(), **overrides)


def test_layerdrop_drops_whole_ode_blocks_in_training(task):
    no_dropout = dict(dropout=0.0, attention_dropout=0.0, activation_dropout=0.0)
    model = build_model("ode_transformer_rk4", task, encoder_layerdrop=0.5, **no_dropout).train()
    assert isinstance(model.encoder.layers, LayerDropModuleList)
    src, lengths, _ = random_batch(task, [5, 3])
    torch.manual_seed(3)
    runs = {tuple(_encode(model, src, lengths).flatten()[:4].tolist()) for _ in range(8)}
    assert len(runs) > 1  # which blocks run changes from pass to pass
    model.eval()
    with torch.no_grad():
        assert torch.equal(_encode(model, src, lengths), _encode(model, src, lengths))


def _poison_stage(block, bad_stage: int):
    """Make the layer's field return inf at its ``bad_stage``-th evaluation (a hook on fc2)."""
    calls = {"n": 0}

    def poisoned(module, args, out):
        calls["n"] += 1
        if calls["n"] - 1 == bad_stage:
            out = out.clone()
            out[0, 0, 0] = float("inf")
        return out

    block.fc2.register_forward_hook(poisoned)


def test_non_finite_stage_output_is_reported_with_block_stage_and_method(task):
    model = build_model("ode_transformer_rk4_encdec", task, ode_check_finite=True).eval()
    _poison_stage(model.encoder.layers[1], bad_stage=2)
    src, lengths, prev = random_batch(task, [4, 3])
    with pytest.raises(FloatingPointError, match=r"encoder block 1, step 0, stage 3 of method rk4"):
        model(src, lengths, prev)
    model = build_model("ode_transformer_rk4_encdec", task, ode_check_finite=True).eval()
    _poison_stage(model.decoder.layers[0], bad_stage=3)
    with pytest.raises(FloatingPointError, match=r"decoder block 0, step 0, stage 4 of method rk4"):
        model(src, lengths, prev)


def test_non_finite_half_precision_stage_is_a_warning_not_a_crash(task, caplog):
    model = build_model("ode_transformer_rk4", task, ode_check_finite=True).eval().to(torch.bfloat16)
    _poison_stage(model.encoder.layers[0], bad_stage=0)
    src, lengths, prev = random_batch(task, [4, 3])
    with caplog.at_level("WARNING"):
        out = model(src, lengths, prev)[0]
    assert "encoder block 0, step 0, stage 1 of method rk4 (dtype torch.bfloat16)" in caplog.text
    assert not torch.isfinite(out).all()


@pytest.mark.numerics
def test_relative_attention_with_zero_relative_keys_equals_fairseq_attention():
    from fairseq.modules.multihead_attention import MultiheadAttention

    from ode_seq.layers.relative_attention import RelativePositionSelfAttention

    torch.manual_seed(0)
    rel = RelativePositionSelfAttention(32, 4, max_relative_position=3).double().eval()
    plain = MultiheadAttention(32, 4, self_attention=True).double().eval()
    plain.load_state_dict({k: v for k, v in rel.state_dict().items() if not k.startswith("relative_keys")})
    x = torch.randn(7, 2, 32, dtype=torch.float64)
    pad = torch.zeros(2, 7, dtype=torch.bool)
    pad[1, :2] = True
    with torch.no_grad():
        rel.relative_keys.weight.zero_()
        expected = plain(x, x, x, key_padding_mask=pad)[0]
        assert_equal_up_to_rounding(rel(x, x, x, key_padding_mask=pad)[0], expected, 1, model_precision(x.dtype))
        # with relative keys, logits gain q_i . r_clip(j - i)
        rel.relative_keys.weight.normal_()
        logits = rel(x, x, x, before_softmax=True)[0]
        q = rel.q_proj(x).view(7, 8, 8).transpose(0, 1) * rel.scaling
        k = rel.k_proj(x).view(7, 8, 8).transpose(0, 1)
        j_minus_i = torch.arange(7)[None, :] - torch.arange(7)[:, None]
        r = rel.relative_keys.weight[j_minus_i.clamp(-3, 3) + 3]
        expected = q @ k.transpose(1, 2) + torch.einsum("btd,tsd->bts", q, r)
        assert_equal_up_to_rounding(logits, expected, 1, model_precision(x.dtype))


@pytest.mark.numerics
def test_dense_layer_history_feeds_each_block_the_mean_of_normalised_outputs(task):
    model = build_model("ode_transformer_euler", task, encoder_layer_history="dense").double().eval()
    src, lengths, _ = random_batch(task, [5, 3])
    enc = model.encoder
    history = enc.layer_history
    pad = src.eq(task.source_dictionary.pad())
    x, _ = enc.forward_embedding(src)
    x = (x * (1 - pad.unsqueeze(-1).type_as(x))).transpose(0, 1)
    states = [x]
    for i, wrapper in enumerate(enc.layers):
        y = wrapper.block(sum(states) / len(states), encoder_padding_mask=pad)
        states.append(history.layer_norms[i](y))
    expected = enc.layer_norm(sum(states) / len(states))
    with torch.no_grad():
        assert_computes(enc, lambda: enc(src, src_lengths=lengths)["encoder_out"][0], expected)
