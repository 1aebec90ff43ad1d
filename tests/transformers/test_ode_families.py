"""Every family of ode_seq.transformers (Llama, Qwen2, Mistral, GPT-2): its auto classes, Euler
with one step per layer = the family's own model, its checkpoints load unchanged (upcycling), and
its blocks' field is made of its own sublayers (GPT-2's LayerNorm, Conv1D attention and MLP)."""

import pytest
import torch
from transformers import AutoConfig, AutoModel, AutoModelForCausalLM

import ode_seq.transformers as ode_transformers
from tests.numerics import assert_equal_up_to_rounding
from tests.transformers.ode_models import (
    FAMILY_SIZES,
    LEFT_PADDED,
    TOKENS,
    field_evaluations,
    heun,
    ode_model,
    original,
)

FAMILIES = {"llama": "Llama", "qwen2": "Qwen2", "mistral": "Mistral", "gpt2": "GPT2"}


@pytest.mark.parametrize("family, name", FAMILIES.items())
def test_the_auto_classes_build_each_familys_ode_model(family, name):
    config = AutoConfig.for_model(f"ode_{family}", **FAMILY_SIZES[family][1], decoder_ode_method="rk4")
    assert type(config) is getattr(ode_transformers, f"ODE{name}Config")
    assert type(AutoModel.from_config(config)) is getattr(ode_transformers, f"ODE{name}Model")
    assert type(AutoModelForCausalLM.from_config(config)) is getattr(ode_transformers, f"ODE{name}ForCausalLM")


@pytest.mark.parametrize("attention_mask", [None, LEFT_PADDED], ids=["unpadded", "left-padded"])
@pytest.mark.parametrize("solved", [False, True], ids=["the-familys-forward", "solved"])
@pytest.mark.parametrize("family", FAMILIES)
def test_euler_with_one_step_per_layer_is_the_familys_own_model(family, solved, attention_mask):
    """A block of one Euler step runs the family's forward; with its stages checkpointed (which
    only gradients use) the solver computes y = z + F(z) from the block's field instead. Mistral's
    sliding window (4) is shorter than the inputs (9)."""
    reference = original(family)
    model = ode_model(family, dtype=torch.float32)
    model.load_state_dict(reference.state_dict())
    if solved:
        model.activation_checkpointing_enable()
    blocks = [module for module in model.modules() if hasattr(module, "is_family_layer")]
    assert [block.is_family_layer(block.registered_solver()) for block in blocks] == [not solved] * 2
    with torch.no_grad():
        expected = reference(TOKENS, attention_mask=attention_mask).logits
        actual = model(TOKENS, attention_mask=attention_mask).logits
    assert_equal_up_to_rounding(actual, expected, field_evaluations(model.config), torch.float32)


@pytest.mark.parametrize("family, name", FAMILIES.items())
def test_a_familys_checkpoint_loads_into_its_ode_model_unchanged(tmp_path, family, name):
    reference = original(family)
    reference.save_pretrained(tmp_path)
    model_class = getattr(ode_transformers, f"ODE{name}ForCausalLM")
    model, info = model_class.from_pretrained(tmp_path, decoder_ode_method="heun", output_loading_info=True)
    assert (model.config.model_type, model.config.decoder_ode_method) == (f"ode_{family}", "heun")
    assert (info["missing_keys"], info["unexpected_keys"]) == (set(), set())
    expected = reference.state_dict()
    assert sorted(model.state_dict()) == sorted(expected)
    assert all(torch.equal(tensor, expected[key]) for key, tensor in model.state_dict().items())


def test_a_gpt2_block_is_heun_over_its_own_sublayers():
    """F(z) = a(z) + m(z + a(z)), a(x) = Attn(LN₁ x), m(x) = MLP(LN₂ x) (GPT-2's module names)."""
    model = ode_model("gpt2", decoder_ode_method="heun")
    block = model.transformer.h[0]
    y = torch.randn(2, 7, 32, generator=torch.Generator().manual_seed(1), dtype=torch.float64)

    def a(x):
        return block.attn(block.ln_1(x), attention_mask=None)[0]

    def F(z):
        return a(z) + block.mlp(block.ln_2(z + a(z)))

    with torch.no_grad():
        assert_equal_up_to_rounding(block(y), heun(F, y), 2, torch.float32)


@pytest.mark.parametrize("family", FAMILIES)
def test_a_familys_ode_model_saves_and_reloads_through_the_auto_class(tmp_path, family):
    """With its settings and its solver weights (one shared gate, a corrector per block)."""
    ode = dict(decoder_ode_method="rk3", ode_coefficients="learned-shared", decoder_ode_corrector="multistep")
    model = ode_model(family, **ode)
    model.save_pretrained(tmp_path)
    reloaded = AutoModelForCausalLM.from_pretrained(tmp_path, dtype=torch.float64).eval()
    assert type(reloaded) is type(model)
    assert {name: getattr(reloaded.config, name) for name in ode} == ode
    with torch.no_grad():
        expected = model(TOKENS).logits
        actual = reloaded(TOKENS).logits
    assert_equal_up_to_rounding(actual, expected, field_evaluations(model.config), torch.float32)


def test_gpt2_with_cross_attention_is_refused_naming_the_option():
    with pytest.raises(ValueError, match="add_cross_attention: an ODE decoder block .* add_cross_attention=False"):
        ode_model("gpt2", add_cross_attention=True)
