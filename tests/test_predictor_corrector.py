"""PCformer's predictor–corrector stacks: encoder and decoder blocks equal the paper's formula (and
the public code's DLCL form), the output reads earlier blocks' first-stage values, incremental
decoding equals the full forward, and what a corrector cannot run is refused."""

from typing import Callable, List

import pytest
import torch
from fairseq.modules.transformer_layer import TransformerDecoderLayerBase, TransformerEncoderLayerBase

from ode_seq.models.config import stack_correctors
from tests.conftest import (
    TinyTask,
    assert_beam_search_with_caches_equals_prefix_recomputation,
    build_model,
    random_batch,
)
from tests.numerics import assert_computes, assert_equal_up_to_rounding, assert_incremental_decoding_equals_full_forward

Field = Callable[[torch.Tensor], torch.Tensor]
PC = dict(ode_coefficients="ema", encoder_ode_corrector="multistep", decoder_ode_corrector="multistep")


def pc_model(**overrides):
    """A float64 encoder-decoder, Heun predictors with EMA weights and multistep correctors in both
    stacks, its corrector and EMA weights moved off their initial values."""
    options = dict(PC, encoder_ode_method="heun", decoder_ode_method="heun", encoder_layers=4, decoder_layers=3)
    model = build_model("pcformer_small", TinyTask(), **{**options, **overrides}).double().eval()
    generator = torch.Generator().manual_seed(7)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if ".corrector." in name or ".combiner." in name or "corrector_states" in name:
                p.add_(0.2 * torch.randn(p.shape, generator=generator, dtype=p.dtype))
    return model


def layer_fields(blocks, layer_class, cfg, call) -> List[Field]:
    """G_l(z) = layer_l(z) − z (the residual-branch field) of fairseq's own layer (built for
    ``cfg``) holding block l's weights, for the other inputs ``call`` passes."""
    fields = []
    for block in blocks:
        layer = layer_class(cfg).double().eval()
        assert not layer.load_state_dict(block.state_dict(), strict=False).missing_keys
        fields.append(lambda z, layer=layer: call(layer, z) - z)
    return fields


def paper_formula(blocks, fields: List[Field], y: torch.Tensor) -> torch.Tensor:
    """Heun predictor with EMA weights, y' = y + α F(P) + Σ_{j=0}^{m} β_j k_1^{(l−j)} over the
    stack's blocks l, the first-stage values before block 0 taken as block 0's."""
    first_stages = []
    for block, G in zip(blocks, fields):
        ema, alpha, beta = block.combiner.beta, block.corrector.alpha, block.corrector.beta
        k1 = G(y)
        k2 = G(y + k1)
        prediction = y + ema * (1 - ema) * k1 + ema * k2
        first_stages.append(k1)
        history = [first_stages[max(len(first_stages) - 1 - j, 0)] for j in range(len(beta))]
        y = y + alpha * G(prediction) + sum(b * k for b, k in zip(beta, history))
    return y


def encoder_blocks_and_fields(model):
    blocks = list(model.encoder.layers)
    return blocks, layer_fields(blocks, TransformerEncoderLayerBase, model.cfg, lambda layer, z: layer(z, None))


def run_encoder_blocks(blocks, y):
    for block in blocks:
        y = block(y, None)
    return y


@pytest.mark.numerics
@pytest.mark.parametrize("history", [0, 1, 5])
def test_encoder_stack_equals_the_papers_predictor_corrector_formula(history):
    model = pc_model(encoder_ode_corrector_history=history)
    blocks, fields = encoder_blocks_and_fields(model)
    y = torch.randn(5, 2, 32, dtype=torch.float64)
    with torch.no_grad():
        expected = paper_formula(blocks, fields, y)
    assert_computes(model, lambda: run_encoder_blocks(blocks, y), expected)


@pytest.mark.numerics
def test_decoder_stack_equals_the_papers_predictor_corrector_formula():
    model = pc_model(decoder_ode_corrector_history=1)
    blocks = list(model.decoder.layers)
    y, memory = torch.randn(6, 2, 32, dtype=torch.float64), torch.randn(4, 2, 32, dtype=torch.float64)
    causal = model.decoder.buffered_future_mask(y)

    def call(layer, z):
        return layer(z, memory, None, self_attn_mask=causal)[0]

    def run():
        x = y
        for block in blocks:
            x = block(x, memory, None, self_attn_mask=causal)[0]
        return x

    with torch.no_grad():
        expected = paper_formula(blocks, layer_fields(blocks, TransformerDecoderLayerBase, model.cfg, call), y)
    assert_computes(model, run, expected)


@pytest.mark.numerics
def test_a_block_reads_the_first_stage_values_of_the_m_blocks_before_it_and_no_others():
    model = pc_model(encoder_ode_corrector_history=1)
    blocks = list(model.encoder.layers)
    y = torch.randn(5, 2, 32, dtype=torch.float64)
    with torch.no_grad():
        before_last = run_encoder_blocks(blocks[:-1], y)
        history = blocks[-1].solver.history
        stored = list(history.values)
        unchanged = blocks[-1](before_last, None)
        delta = torch.randn_like(y)
        outputs = []
        for j in (1, 2):  # the block before (j = 1, inside the window m = 1), two before (outside)
            history.values = list(stored)
            history.values[-j] = stored[-j] + delta
            outputs.append(blocks[-1](before_last, None))
    # y' = y + α F̂ + β_0 k_1^{(l)} + β_1 k_1^{(l−1)}: a change δ of k_1^{(l−1)} moves y' by β_1 δ.
    beta = blocks[-1].corrector.beta.detach()
    assert_equal_up_to_rounding(outputs[0] - unchanged, beta[1] * delta, 1, magnitude=unchanged)
    assert torch.equal(outputs[1], unchanged)


@pytest.mark.numerics
def test_encoder_stack_equals_the_public_codes_dlcl_corrector_formula():
    model = pc_model(encoder_ode_corrector="dlcl")
    blocks, fields = encoder_blocks_and_fields(model)
    states = model.encoder.corrector_states
    y = torch.randn(5, 2, 32, dtype=torch.float64)
    with torch.no_grad():
        h, x = [y], y
        for l, (block, G) in enumerate(zip(blocks, fields), start=1):
            ema = block.combiner.beta
            k1 = G(x)
            prediction = x + ema * (1 - ema) * k1 + ema * G(x + k1)
            h.append(states.prediction.layer_norms[l - 1](prediction))
            corrector_input = sum(w * s for w, s in zip(states.prediction.weight[l, : l + 1], h))
            h[l] = states.corrected.layer_norms[l - 1](G(corrector_input))
            x = sum(w * s for w, s in zip(states.corrected.weight[l, : l + 1], h))
    assert_computes(model, lambda: run_encoder_blocks(blocks, y), x)


@pytest.mark.numerics
@pytest.mark.parametrize(
    "overrides",
    [
        dict(),
        dict(decoder_ode_method="rk4", decoder_ode_corrector_history=0, ode_coefficients="fixed"),
        dict(decoder_share_group_size=3, decoder_ode_steps=4),
        dict(decoder_layer_history="learnable_dense", ode_field="whole-layer", encoder_ode_corrector="dlcl"),
    ],
    ids=["heun-ema", "rk4-fixed-m0", "shared-group", "layer-history-dlcl-encoder"],
)
def test_incremental_decoding_equals_full_forward(overrides):
    model = pc_model(**overrides)
    assert_incremental_decoding_equals_full_forward(model, TinyTask(), [6, 3, 8, 5], seed=4)


@pytest.mark.numerics
def test_beam_search_with_caches_equals_prefix_recomputation():
    model = pc_model()
    assert_beam_search_with_caches_equals_prefix_recomputation(model, TinyTask(), beam=4, max_len_b=10)


def test_decoder_caches_one_self_attention_state_per_evaluation_predictor_and_corrector():
    model = pc_model().float()
    task = TinyTask()
    src, lengths, prev = random_batch(task, [4, 4])
    state: dict = {}
    with torch.no_grad():
        encoder_out = model.encoder(src, src_lengths=lengths)
        for t in range(3):
            model.decoder(prev[:, : t + 1], encoder_out=encoder_out, incremental_state=state)
    block = model.decoder.layers[0]
    keys = [
        block.self_attn._get_input_buffer(block.get_incremental_state(state, f"step0.stage{i}"))["prev_key"]
        for i in range(3)  # Heun's 2 stages, then the corrector
    ]
    assert all(k.size(2) == 3 for k in keys)
    assert not torch.equal(keys[1], keys[2])


@pytest.mark.parametrize(
    "overrides, error",
    [
        (dict(encoder_ode_method="dopri5"), "adaptive --encoder-ode-method dopri5 has none"),
        (dict(ode_scope="sublayer"), "--ode-scope block"),
        (dict(encoder_layerdrop=0.1), "--encoder-layerdrop 0"),
        (dict(checkpoint_activations=True), "use --ode-checkpoint-stages instead"),
        (dict(encoder_ode_corrector_history=-1), "must be >= 0"),
        (dict(encoder_ode_corrector="dlcl", encoder_share_group_size=2), "one state per layer"),
    ],
)
def test_what_a_corrector_cannot_run_is_refused_naming_the_option(overrides, error):
    with pytest.raises(ValueError, match=error):
        build_model("pcformer_small", TinyTask(), **{**PC, **overrides})


def test_the_dlcl_corrector_is_the_encoders_only_and_the_stable_kind_refuses_correctors():
    assert "dlcl" in stack_correctors("encoder") and "dlcl" not in stack_correctors("decoder")
    with pytest.raises(ValueError, match="--decoder-ode-corrector 'dlcl' is not valid"):
        build_model("pcformer_small", TinyTask(), decoder_ode_corrector="dlcl")
    with pytest.raises(ValueError, match="stable kind bounds its Runge-Kutta steps"):
        build_model("stable_ode_transformer_small", TinyTask(), encoder_ode_corrector="multistep")


def test_a_checkpoint_of_another_history_length_is_refused_naming_the_option():
    trained = build_model("pcformer_small", TinyTask()).state_dict()
    with pytest.raises(
        RuntimeError, match=r"of another shape \(encoder\.layers\.0\.corrector\.beta.*--\*-ode-corrector-history"
    ):
        build_model("pcformer_small", TinyTask(), encoder_ode_corrector_history=1).load_state_dict(trained)


@pytest.mark.parametrize("corrector", ["multistep", "dlcl"])
def test_a_transformer_checkpoint_fine_tunes_into_a_predictor_corrector_stack(corrector):
    euler = build_model("ode_transformer_euler_small", TinyTask()).state_dict()
    model = build_model("pcformer_small", TinyTask(), encoder_ode_corrector=corrector, finetune_from_model="euler.pt")
    state = dict(euler)
    model.upgrade_state_dict_named(state, "")  # fairseq's loading does this before load_state_dict
    model.load_state_dict(state)  # strict: the EMA and corrector weights start at their initial values
    assert {k for k in state if k not in euler} == {k for k in model.state_dict() if k not in euler} != set()
