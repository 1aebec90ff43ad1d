"""Non-autonomous ODE Transformer: θ(τ), exact export to a plain Transformer, incremental decoding."""

import pytest
import torch
from fairseq.modules.transformer_layer import TransformerDecoderLayerBase, TransformerEncoderLayerBase

from ode_seq.export.plain import discrete_state_dict
from ode_seq.layers.time_weights import TimeEmbedding
from tests.conftest import TinyTask, build_model, build_sized_model, random_batch
from tests.numerics import assert_computes, assert_incremental_decoding_equals_full_forward


def _make_time_dependent(model, seed=0):
    """Give the zero-initialised time MLPs random output weights, so θ really depends on τ."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for side in (model.encoder, model.decoder):
            for network in side.layers[0].modules():
                if isinstance(network, TimeEmbedding):
                    network.lin2.weight.copy_(torch.randn(network.lin2.weight.shape, generator=g))
                    network.lin2.bias.copy_(torch.randn(network.lin2.bias.shape, generator=g))
            for module in side.layers[0].theta.params.values():
                for name, p in module.named_parameters():
                    if name in ("A", "B"):
                        p.mul_(30.0)
    return model


def _log_probs(model, batch):
    src, lengths, prev = batch
    return model.get_normalized_probs(model(src, lengths, prev), log_probs=True)


@pytest.mark.numerics
@pytest.mark.parametrize("steps", [(2, 2), (3, 5)])
def test_exported_discrete_transformer_equals_ode_model_at_that_step_count(steps):
    task = TinyTask()
    ode = _make_time_dependent(
        build_model(
            "ode_transformer_nonauto_small",
            task,
            **_tiny(),
            encoder_ode_steps=steps[0],
            decoder_ode_steps=steps[1],
        )
    ).double()
    plain = build_model(
        "transformer",
        task,
        encoder_layers=steps[0],
        decoder_layers=steps[1],
        encoder_normalize_before=True,
        decoder_normalize_before=True,
    ).double()
    ode.eval()
    plain.load_state_dict(discrete_state_dict(ode))
    plain.eval()
    batch = random_batch(task, [6, 4, 7])
    with torch.no_grad():
        assert_computes(plain, lambda: _log_probs(plain, batch), _log_probs(ode, batch))


def _tiny():
    return dict(time_features=8, time_hidden_dim=16, time_embed_dim=4)


def test_zero_initialised_time_mlp_gives_time_independent_weights():
    model = build_model("ode_transformer_nonauto", TinyTask(), **_tiny())
    block = model.encoder.layers[0]
    with torch.no_grad():
        early, late = block.weights_at(0.1), block.weights_at(0.9)
        assert all(torch.equal(early[k], late[k]) for k in early)
        _make_time_dependent(model)
        changed = block.weights_at(0.9)
    assert not torch.allclose(early["fc1.weight"], changed["fc1.weight"])


def _layer_params(arch):
    return {
        n: p.numel() for n, p in build_model(arch, TinyTask(), **_tiny()).encoder.layers[0].theta.named_parameters()
    }


@pytest.mark.parametrize("form, rank", [("paper", 8), ("low-rank", 3)])
def test_parameter_counts_match_the_formulas(form, rank):
    d_e, s, hidden = 4, 8, 16
    template = build_model("transformer", TinyTask(), encoder_normalize_before=True).encoder.layers[0]
    expected = 0
    for name, p in template.named_parameters():
        if form == "low-rank" and p.dim() == 2:
            out_f, in_f = p.shape
            expected += p.numel() + rank * (out_f + in_f + d_e)
        else:
            expected += p.numel() * (d_e + 1)
    mlp = (2 * s + 1) * hidden + hidden + hidden * d_e + d_e
    model = build_model("ode_transformer_nonauto", TinyTask(), **_tiny(), time_weights=form, time_rank=rank)
    block = model.encoder.layers[0]
    assert sum(p.numel() for p in block.theta.parameters()) == expected
    assert sum(p.numel() for p in block.time_embedding.parameters()) == mlp
    assert not [n for n, _ in block.named_parameters(recurse=False)]
    per_weight = build_model(
        "ode_transformer_nonauto",
        TinyTask(),
        **_tiny(),
        time_weights=form,
        time_rank=rank,
        time_network="per-weight",
    )
    for side, modules in (("encoder", 8), ("decoder", 13)):
        block = getattr(per_weight, side).layers[0]
        assert not hasattr(block, "time_embedding")
        assert len(block.theta.networks) == modules  # Q, K, V, out (x2 in the decoder), fc1, fc2, norms
        assert sum(p.numel() for p in block.theta.parameters()) == (
            sum(p.numel() for p in block.theta.params.parameters()) + modules * mlp
        )
    assert sum(p.numel() for p in per_weight.encoder.layers[0].theta.params.parameters()) == expected


def test_per_weight_networks_move_only_the_weights_of_their_own_module():
    model = build_model("ode_transformer_nonauto_parallel_small", TinyTask(), **_tiny())
    block = model.encoder.layers[0]
    network = block.theta.networks["fc1"]
    with torch.no_grad():
        network.lin2.weight.normal_()
        network.lin2.bias.normal_()
        early, late = block.weights_at(0.25), block.weights_at(1.0)
    changed = {name for name in early if not torch.equal(early[name], late[name])}
    assert changed == {"fc1.weight", "fc1.bias"}


def test_parity_variant_matches_transformer_base_parameter_count():
    counts = {}
    for arch in ("ode_transformer_nonauto_parity", "ode_transformer_euler"):
        model = build_sized_model(arch, TinyTask())  # the architecture's own sizes
        counts[arch] = sum(p.numel() for n, p in model.named_parameters() if "embed_tokens" not in n)
    ratio = counts["ode_transformer_nonauto_parity"] / counts["ode_transformer_euler"]
    assert abs(ratio - 1) < 0.03, counts


@pytest.mark.numerics
@pytest.mark.parametrize(
    "method, arch",
    [
        ("euler", "ode_transformer_nonauto_small"),
        ("heun", "ode_transformer_nonauto_small"),
        ("euler", "ode_transformer_nonauto_parallel_small"),
        ("rk4", "ode_transformer_nonauto_parallel_small"),
    ],
)
def test_incremental_decoding_equals_full_forward(method, arch):
    task = TinyTask()
    model = _make_time_dependent(
        build_model(
            arch,
            task,
            **_tiny(),
            decoder_ode_method=method,
            encoder_ode_method=method,
            decoder_ode_steps=3,
        )
    )
    assert_incremental_decoding_equals_full_forward(model.double().eval(), task, [6, 3, 8], seed=2)


def test_non_autonomous_rejects_adaptive_solvers_and_bad_sizes():
    with pytest.raises(ValueError, match="non-autonomous stacks use fixed grids"):
        build_model("ode_transformer_nonauto_small", TinyTask(), **_tiny(), encoder_ode_method="dopri5")
    with pytest.raises(
        ValueError, match="--time-embed-dim, --time-features, --time-hidden-dim and --time-rank must be positive"
    ):
        build_model("ode_transformer_nonauto_small", TinyTask(), time_embed_dim=0)


def _layer_at(block, tau, layer_class, cfg):
    """fairseq's own pre-norm layer holding the block's weights θ(τ)."""
    layer = layer_class(cfg).eval().double()
    layer.load_state_dict({k: v.detach() for k, v in block.weights_at(tau).items()})
    return layer


def _ffn(layer, z):
    return layer.fc2(layer.activation_fn(layer.fc1(z)))


@pytest.mark.numerics
def test_parallel_non_autonomous_euler_step_is_the_papers_field():
    # x_{n+1} = x_n + h (Attn(LN_a(x_n); θ(τ)) + FFN(LN_m(x_n); θ(τ))), τ = (n+1)/N (Tong et al.)
    model = (
        _make_time_dependent(
            build_model(
                "ode_transformer_nonauto_parallel_small",
                TinyTask(),
                **_tiny(),
                encoder_ode_steps=4,
                decoder_ode_steps=4,
            )
        )
        .eval()
        .double()
    )
    x = torch.randn(5, 2, 32, dtype=torch.float64)
    block = model.encoder.layers[0]
    h = block.solver.step_size
    assert h == 0.5  # 2 layers, 4 steps
    expected = x
    with torch.no_grad():
        for n in range(4):
            layer = _layer_at(block, (n + 1) / 4, TransformerEncoderLayerBase, block.cfg)
            z = layer.self_attn_layer_norm(expected)
            attn = layer.self_attn(query=z, key=z, value=z, key_padding_mask=None)[0]
            expected = expected + h * (attn + _ffn(layer, layer.final_layer_norm(expected)))
        assert_computes(block, lambda: block(x, None), expected)

        decoder = model.decoder.layers[0]
        memory = torch.randn(6, 2, 32, dtype=torch.float64)
        expected = x
        causal = torch.triu(torch.full((5, 5), float("-inf"), dtype=torch.float64), 1)
        for n in range(4):
            layer = _layer_at(decoder, (n + 1) / 4, TransformerDecoderLayerBase, block.cfg)
            z = layer.self_attn_layer_norm(expected)
            attn = layer.self_attn(query=z, key=z, value=z, attn_mask=causal)[0]
            z = layer.encoder_attn_layer_norm(expected)
            cross = layer.encoder_attn(query=z, key=memory, value=memory, static_kv=True)[0]
            expected = expected + h * (attn + cross + _ffn(layer, layer.final_layer_norm(expected)))
        assert_computes(decoder, lambda: decoder(x, encoder_out=memory, self_attn_mask=causal)[0], expected)


def test_validation_after_an_optimiser_step_sees_the_updated_weights():
    # fairseq's Adam writes p.data, which does not bump p._version (the cache key); fairseq
    # switches the model to eval() before validating, and that must drop the cached θ(τ).
    task = TinyTask()
    model = _make_time_dependent(build_model("ode_transformer_nonauto_small", task, **_tiny())).eval()
    batch = random_batch(task, [5, 3])
    with torch.no_grad():
        before = _log_probs(model, batch)
    model.train()
    for p in model.encoder.layers[0].theta.parameters():
        p.data.add_(0.05)
    model.eval()
    fresh = build_model("ode_transformer_nonauto_small", task, **_tiny()).eval()
    fresh.load_state_dict(model.state_dict())
    with torch.no_grad():
        after, expected = _log_probs(model, batch), _log_probs(fresh, batch)
    assert (after - before).abs().max() > 1e-3
    assert torch.equal(after, expected)  # the same weights through the same code


def test_a_time_dependent_model_prints_its_layers_and_keeps_no_placeholder_in_its_state():
    """fairseq-train logs the model's printout: the layers whose weights are θ(τ) must print (they
    raised AttributeError: 'Linear' object has no attribute 'bias'), and their placeholders stay out
    of the state dict and the parameters."""
    model = build_model("ode_transformer_nonauto_small", TinyTask(), **_tiny())
    printout = str(model)
    assert "fc1): Linear(" in printout and "bias=True" in printout
    state = model.state_dict()
    assert not any(name.endswith("fc1.bias") or name.endswith("fc1.weight") for name in state)
    assert all(p.numel() > 0 for p in model.parameters())
