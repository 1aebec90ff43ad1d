"""F is a function: ``block.field(z, inputs, t=t)`` is what a block evaluates at each of its stages,
for every field form, layer kind and both sides; with scope ``sublayer`` each stage is one of the
same sublayers' branches."""

import pytest
import torch

from ode_seq.layers import ode_blocks
from ode_seq.solvers import SolveObserver
from tests.conftest import TinyTask, build_model
from tests.numerics import assert_equal_up_to_rounding, assert_incremental_decoding_equals_full_forward
from tests.test_nonautonomous import _make_time_dependent, _tiny


class StageValues(SolveObserver):
    """(stage index, t, z, k) of every stage evaluation k = F(t, z)."""

    def __init__(self) -> None:
        self.values = []

    def stage_evaluated(self, step, stage, t, z, k):
        self.values.append((stage, t, z, k))


def _stage_values(block, x, *args, **kwargs):
    observer = StageValues()
    handle = block.register_observer(observer)
    try:
        with torch.no_grad():
            block(x, *args, **kwargs)
    finally:
        handle.remove()
    return observer.values


def _blocks_and_inputs(arch, **options):
    """The first encoder and decoder blocks of a tiny model, and inputs for each (one padded
    source position, the decoder's future mask)."""
    torch.manual_seed(0)
    model = build_model(arch, TinyTask(), **options).eval()
    if arch.startswith("ode_transformer_nonauto"):
        _make_time_dependent(model)
    x = torch.randn(5, 2, 32)
    padding = torch.zeros(2, 5, dtype=torch.bool)
    padding[1, 0] = True
    future = torch.triu(torch.full((4, 4), float("-inf")), 1)
    decoder_inputs = dict(encoder_out=x, encoder_padding_mask=padding, self_attn_mask=future)
    return (
        (ode_blocks(model.encoder)[0], x, dict(encoder_padding_mask=padding)),
        (ode_blocks(model.decoder)[0], torch.randn(4, 2, 32), decoder_inputs),
    )


# Every stage computes exactly what field() computes: the same operations on the same tensors.
@pytest.mark.parametrize(
    "arch, options",
    [
        ("ode_transformer_rk4_encdec", {}),
        ("ode_transformer_rk4_encdec", dict(ode_field="parallel-branch")),
        ("ode_transformer_rk4_encdec", dict(ode_field="whole-layer")),
        ("ode_transformer_rk4_encdec", dict(encoder_relative_positions=2, decoder_relative_positions=2)),
        ("ode_transformer_rk4_encdec", dict(encoder_share_group_size=2, encoder_ode_steps=3)),
        ("ode_transformer_nonauto_small", dict(encoder_ode_method="rk4", decoder_ode_method="heun", **_tiny())),
        ("ode_transformer_nonauto_parallel_small", dict(encoder_ode_method="rk4", **_tiny())),
        ("stable_ode_transformer_small", dict(attention_kernel="l2", decoder_ode_method="rk4")),
    ],
)
def test_field_is_what_every_stage_of_the_block_evaluates(arch, options):
    for block, x, inputs in _blocks_and_inputs(arch, **options):
        values = _stage_values(block, x, **inputs)
        assert len(values) == block.solver.steps * block.solver.tableau.stages
        with torch.no_grad():
            for _, t, z, k in values:
                assert torch.equal(block.field(z, t=t, **inputs), k)


def test_field_of_the_time_dependent_kind_depends_on_t():
    for block, x, inputs in _blocks_and_inputs("ode_transformer_nonauto_small", encoder_ode_method="rk4", **_tiny()):
        _, t, z, k = _stage_values(block, x, **inputs)[1]
        with torch.no_grad():
            assert not torch.allclose(block.field(z, t=t + 0.5, **inputs), k, atol=1e-3)


def test_sublayer_scope_integrates_the_branches_of_the_same_sublayers():
    for block, x, inputs in _blocks_and_inputs("ode_transformer_rk4_encdec", ode_scope="sublayer"):
        stages = block.solver.tableau.stages
        values = _stage_values(block, x, **inputs)
        parts = len(block.sublayers(0.0, **inputs))
        assert len(values) == block.solver.steps * parts * stages
        with torch.no_grad():
            for stage, t, z, k in values:
                assert torch.equal(block.sublayers(t, **inputs)[stage // stages].branch(z), k)


PRE_NORM = dict(encoder_normalize_before=True, decoder_normalize_before=True)
POST_NORM = dict(encoder_normalize_before=False, decoder_normalize_before=False)
# fairseq's layer options that change what its layers compute (the scale_* ones are decoder-only).
LAYER_OPTIONS = [
    dict(scale_attn=True),
    dict(scale_fc=True),
    dict(scale_heads=True),
    dict(cross_self_attention=True),
    dict(activation_fn="gelu"),
]


def _name(options):
    return ",".join(f"{k}={v}" for k, v in options.items())


def _layers_blocks_and_inputs(norms, **options):
    """(fairseq layer, ODE Euler block with the same weights, its input, its other inputs) of
    each side, in eval mode; the options' own parameters away from their initial values."""
    torch.manual_seed(0)
    task = TinyTask()
    vanilla = build_model("transformer", task, **norms, **options).eval()
    ode = build_model("ode_transformer_euler", task, seed=1, **norms, **options).eval()
    with torch.no_grad():
        for name, p in vanilla.named_parameters():
            if name.endswith(("c_attn", "w_resid")) or ".attn_ln." in name or ".ffn_layernorm." in name:
                p.uniform_(0.5, 1.5)
    ode.load_state_dict(vanilla.state_dict())
    padding = torch.zeros(2, 5, dtype=torch.bool)
    padding[1, 0] = True
    target_padding = torch.zeros(2, 4, dtype=torch.bool)
    target_padding[0, 0] = True
    encoder_out = torch.randn(5, 2, 32)
    decoder_inputs = dict(
        encoder_out=encoder_out,
        encoder_padding_mask=padding,
        self_attn_mask=torch.triu(torch.full((4, 4), float("-inf")), 1),
        self_attn_padding_mask=target_padding,
    )
    return [
        (vanilla.encoder.layers[0], ode.encoder.layers[0], encoder_out, dict(encoder_padding_mask=padding)),
        (vanilla.decoder.layers[0], ode.decoder.layers[0], torch.randn(4, 2, 32), decoder_inputs),
    ]


def _output(layer, x, inputs):
    with torch.no_grad():
        out = layer(x, **inputs)
    return out[0] if isinstance(out, tuple) else out


@pytest.mark.numerics
@pytest.mark.parametrize("options", LAYER_OPTIONS + [dict(scale_resids=True)], ids=_name)
@pytest.mark.parametrize("norms", [PRE_NORM, POST_NORM], ids=["pre-norm", "post-norm"])
def test_whole_layer_field_is_fairseqs_layer_with_its_options(norms, options):
    for layer, block, x, inputs in _layers_blocks_and_inputs(norms, ode_field="whole-layer", **options):
        with torch.no_grad():
            field = block.field(x, **inputs)
        assert_equal_up_to_rounding(field, _output(layer, x, inputs), evaluations=1)


@pytest.mark.numerics
@pytest.mark.parametrize("options", LAYER_OPTIONS, ids=_name)
def test_euler_step_of_the_residual_branch_is_fairseqs_pre_norm_layer_with_its_options(options):
    for layer, block, x, inputs in _layers_blocks_and_inputs(PRE_NORM, **options):
        assert_equal_up_to_rounding(_output(block, x, inputs), _output(layer, x, inputs), evaluations=1)


@pytest.mark.numerics
@pytest.mark.parametrize("options", LAYER_OPTIONS, ids=_name)
def test_incremental_decoding_equals_full_forward_with_layer_options(options):
    task = TinyTask()
    model = build_model("ode_transformer_rk4_encdec", task, **options).eval()
    assert_incremental_decoding_equals_full_forward(model, task, [6, 3, 8, 5], seed=3)
