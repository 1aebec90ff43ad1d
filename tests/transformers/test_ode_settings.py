"""Every decoder ODE setting of ode_seq.transformers is its formula, written here over the layer's
own sublayers a(x) = SelfAttn(RMSNorm₁ x) and m(x) = MLP(RMSNorm₂ x) (F(z) = a(z) + m(z + a(z))):
the tableaus (IIET's iterations among them), steps over an interval, every kind of stage weights,
the three field forms, RK-sublayer steps and PCformer's predictor–corrector; upcycling initialises
each kind of solver weights as ode-seq does; settings no decoder takes are refused."""

import pytest
import torch

from ode_seq.transformers import ODELlamaForCausalLM
from tests.numerics import assert_computes
from tests.transformers.ode_models import LLAMA_SIZES, field, heun, ode_model, original, rk4, sublayers

LENGTH = 7
# float64, compared at float32 rounding (tests/numerics.py: a claim of exactness).
Y = torch.randn(2, LENGTH, LLAMA_SIZES["hidden_size"], generator=torch.Generator().manual_seed(1), dtype=torch.float64)


def midpoint(F, y):
    return y + F(y + F(y) / 2)


def ralston(F, y):
    k1 = F(y)
    return y + (k1 + 3 * F(y + 2 * k1 / 3)) / 4


def rk3(F, y):
    k1 = F(y)
    k2 = F(y + k1 / 2)
    k3 = F(y - k1 + 2 * k2)
    return y + (k1 + 4 * k2 + k3) / 6


def rk4_38(F, y):
    k1 = F(y)
    k2 = F(y + k1 / 3)
    k3 = F(y - k1 / 3 + k2)
    k4 = F(y + k1 - k2 + k3)
    return y + (k1 + 3 * k2 + 3 * k3 + k4) / 8


def iterated_implicit_euler(r):
    """IIET: x⁽⁰⁾ = y + F(y), x⁽ⁱ⁾ = y + F(x⁽ⁱ⁻¹⁾) for i = 1 … r, y' = x⁽ʳ⁾."""

    def step(F, y):
        x = y + F(y)
        for _ in range(r):
            x = y + F(x)
        return x

    return step


def half(F):
    return lambda z: F(z) / 2


def heun_steps(steps, interval):
    """N Heun steps of size h = T/N: y ← y + h (k1 + k2)/2, k2 = F(y + h k1)."""

    def solve(F, y):
        h = interval / steps
        for _ in range(steps):
            k1 = F(y)
            y = y + h * (k1 + F(y + h * k1)) / 2
        return y

    return solve


def block_and_inputs(**ode):
    """(model, its first block, the rotary embeddings of positions 0 … LENGTH−1)."""
    model = ode_model("llama", **ode)
    position_embeddings = model.model.rotary_emb(Y, torch.arange(LENGTH).unsqueeze(0))
    return model, model.model.layers[0], position_embeddings


def assert_block_computes(model, layer, position_embeddings, expected):
    with torch.no_grad():
        assert_computes(model, lambda: layer(Y, attention_mask=None, position_embeddings=position_embeddings), expected)


FIXED_GRID = {
    "midpoint": (dict(decoder_ode_method="midpoint"), midpoint),
    "ralston": (dict(decoder_ode_method="ralston"), ralston),
    "rk3": (dict(decoder_ode_method="rk3"), rk3),
    "rk4_38": (dict(decoder_ode_method="rk4_38"), rk4_38),
    **{f"iie{r}": (dict(decoder_ode_method=f"iie{r}"), iterated_implicit_euler(r)) for r in (1, 2, 4)},
    "heun-2-steps": (dict(decoder_ode_method="heun", decoder_ode_steps=2), heun_steps(2, 1.0)),
    "heun-2-steps-over-2": (
        dict(decoder_ode_method="heun", decoder_ode_steps=2, decoder_ode_interval=2.0),
        heun_steps(2, 2.0),
    ),
    # RK4 of step h on F is RK4 of step 1 on hF.
    "rk4-2-steps": (dict(decoder_ode_method="rk4", decoder_ode_steps=2), lambda F, y: rk4(half(F), rk4(half(F), y))),
}


@pytest.mark.parametrize("ode, formula", FIXED_GRID.values(), ids=FIXED_GRID.keys())
def test_a_fixed_grid_block_is_its_formula_over_the_layers_sublayers(ode, formula):
    model, layer, position_embeddings = block_and_inputs(**ode)
    with torch.no_grad():
        expected = formula(field(layer, position_embeddings), Y)
    assert_block_computes(model, layer, position_embeddings, expected)


def test_free_weights_weigh_the_stages_with_their_trained_values():
    """y + w_1 k_1 + w_2 k_2 + w_3 k_3 (RK3's stages), w the block's free parameters."""
    model, layer, position_embeddings = block_and_inputs(decoder_ode_method="rk3", ode_coefficients="free")
    torch.nn.init.normal_(layer.combiner.w)
    w = layer.combiner.w
    with torch.no_grad():
        F = field(layer, position_embeddings)
        k1 = F(Y)
        k2 = F(Y + k1 / 2)
        k3 = F(Y - k1 + 2 * k2)
        expected = Y + w[0] * k1 + w[1] * k2 + w[2] * k3
    assert_block_computes(model, layer, position_embeddings, expected)


def test_ema_weights_are_beta_times_powers_of_one_minus_beta():
    """PCformer's EMA weights: y + β(1−β) k_1 + β k_2 for Heun's two stages."""
    model, layer, position_embeddings = block_and_inputs(decoder_ode_method="heun", ode_coefficients="ema")
    torch.nn.init.constant_(layer.combiner.beta, 0.3)
    with torch.no_grad():
        F = field(layer, position_embeddings)
        k1 = F(Y)
        k2 = F(Y + k1)
        expected = Y + 0.3 * 0.7 * k1 + 0.3 * k2
    assert_block_computes(model, layer, position_embeddings, expected)


def test_a_learned_shared_gate_is_one_module_of_the_stack():
    """One gate g = sigmoid(W·[k_1; k_2] + β) for every block, registered once, on the base model."""
    model, layer, position_embeddings = block_and_inputs(decoder_ode_method="heun", ode_coefficients="learned-shared")
    gate = model.model.shared_combiner
    assert all(block.solver.combine is gate for block in model.model.layers)
    assert [name for name in model.state_dict() if "combiner" in name] == [
        "model.shared_combiner.proj.weight",
        "model.shared_combiner.proj.bias",
    ]
    torch.nn.init.normal_(gate.proj.bias)
    with torch.no_grad():
        F = field(layer, position_embeddings)
        k1 = F(Y)
        k2 = F(Y + k1)
        g = torch.sigmoid(gate.proj(torch.cat([k1, k2], dim=-1)))
        expected = Y + g * k1 + (1 - g) * k2
    assert_block_computes(model, layer, position_embeddings, expected)


def test_the_parallel_branch_field_reads_the_block_input_in_both_sublayers():
    """Heun on F(z) = a(z) + m(z)."""
    model, layer, position_embeddings = block_and_inputs(decoder_ode_method="heun", ode_field="parallel-branch")
    with torch.no_grad():
        a, m = sublayers(layer, position_embeddings)
        expected = heun(lambda z: a(z) + m(z), Y)
    assert_block_computes(model, layer, position_embeddings, expected)


def test_the_whole_layer_field_is_the_layer_with_its_residuals():
    """Heun on F(z) = L(z) = z + a(z) + m(z + a(z))."""
    model, layer, position_embeddings = block_and_inputs(decoder_ode_method="heun", ode_field="whole-layer")
    with torch.no_grad():
        F = field(layer, position_embeddings)
        expected = heun(lambda z: z + F(z), Y)
    assert_block_computes(model, layer, position_embeddings, expected)


def test_rk_sublayer_steps_update_with_each_sublayer_in_turn():
    """Each of 2 steps: Heun on a, then Heun on m from its result (Lie–Trotter), h = ½."""
    model, layer, position_embeddings = block_and_inputs(
        decoder_ode_method="heun", ode_scope="sublayer", decoder_ode_steps=2
    )
    with torch.no_grad():
        a, m = sublayers(layer, position_embeddings)
        expected = Y
        for _ in range(2):
            expected = heun_steps(1, 0.5)(m, heun_steps(1, 0.5)(a, expected))
    assert_block_computes(model, layer, position_embeddings, expected)


def test_pcformer_blocks_are_the_multistep_predictor_corrector_of_the_stack():
    """Heun predictor with EMA weights, P = y_n + β(1−β) k_1 + β k_2, F̂ = F(P), corrected as
    y_{n+1} = y_n + α F̂ + Σ_{j=0}^{m} β_j k_1^{(n−j)}, m = 1, the first step's k_1 standing in
    for the steps before the stack's; the history runs from block 0 into block 1."""
    model, _, position_embeddings = block_and_inputs(
        decoder_ode_method="heun",
        ode_coefficients="ema",
        decoder_ode_corrector="multistep",
        decoder_ode_corrector_history=1,
    )
    blocks = model.model.layers
    for block, (alpha, b0, b1) in zip(blocks, [(0.6, 0.3, -0.2), (0.9, 0.1, 0.4)]):
        torch.nn.init.constant_(block.combiner.beta, 0.3)
        torch.nn.init.constant_(block.corrector.alpha, alpha)
        block.corrector.beta.data = torch.tensor([b0, b1], dtype=torch.float64)
    with torch.no_grad():
        y, first_stages = Y, []
        for block in blocks:
            F = field(block, position_embeddings)
            k1 = F(y)
            k2 = F(y + k1)
            f_hat = F(y + 0.3 * 0.7 * k1 + 0.3 * k2)
            first_stages.insert(0, k1)
            earlier = first_stages[1] if len(first_stages) > 1 else k1
            y = y + block.corrector.alpha * f_hat + block.corrector.beta[0] * k1 + block.corrector.beta[1] * earlier
        expected = y

        def stack():
            x = Y
            for block in blocks:
                x = block(x, attention_mask=None, position_embeddings=position_embeddings)
            return x

        assert_computes(model, stack, expected)


SOLVER_WEIGHTS = {
    "free": (dict(decoder_ode_method="rk3", ode_coefficients="free"), "combiner.w", [1 / 6, 2 / 3, 1 / 6]),
    "free-ones": (dict(decoder_ode_method="rk3", ode_coefficients="free-ones"), "combiner.w", [1.0, 1.0, 1.0]),
    "ema": (dict(decoder_ode_method="heun", ode_coefficients="ema"), "combiner.beta", 0.5),
    "corrector-alpha": (
        dict(decoder_ode_method="heun", decoder_ode_corrector="multistep", decoder_ode_corrector_history=2),
        "corrector.alpha",
        0.25,
    ),
    "corrector-beta": (
        dict(decoder_ode_method="heun", decoder_ode_corrector="multistep", decoder_ode_corrector_history=2),
        "corrector.beta",
        [0.25, 0.25, 0.25],
    ),
}


@pytest.mark.parametrize("ode, name, initial", SOLVER_WEIGHTS.values(), ids=SOLVER_WEIGHTS.keys())
def test_upcycling_initialises_the_solver_weights_as_ode_seq(tmp_path, ode, name, initial):
    """The Llama checkpoint lacks them: free weights start at b (free) or 1 (free-ones), EMA's β at
    ½, a multistep corrector's α and β_j at 1/(m + 2); a model from a config starts the same."""
    original("llama").save_pretrained(tmp_path)
    upcycled, info = ODELlamaForCausalLM.from_pretrained(tmp_path, output_loading_info=True, **ode)
    solver_weights = {key for key in upcycled.state_dict() if ".combiner." in key or ".corrector." in key}
    assert (info["missing_keys"], info["unexpected_keys"]) == (solver_weights, set())
    from_config = ode_model("llama", dtype=torch.float32, **ode)
    for model in (upcycled, from_config):
        for i in range(LLAMA_SIZES["num_hidden_layers"]):
            value = model.state_dict()[f"model.layers.{i}.{name}"]
            assert torch.equal(value, torch.tensor(initial, dtype=value.dtype)), (model, name, value)


def test_upcycling_into_a_learned_shared_gate_adds_one_gate(tmp_path):
    original("llama").save_pretrained(tmp_path)
    model, info = ODELlamaForCausalLM.from_pretrained(
        tmp_path, output_loading_info=True, decoder_ode_method="heun", ode_coefficients="learned-shared"
    )
    gates = {"model.shared_combiner.proj.weight", "model.shared_combiner.proj.bias"}
    assert (info["missing_keys"], info["unexpected_keys"]) == (gates, set())
    weight, bias = model.model.shared_combiner.proj.weight, model.model.shared_combiner.proj.bias
    fan = 2 * LLAMA_SIZES["hidden_size"] + 1
    assert weight.abs().max() <= (6 / fan) ** 0.5 and weight.std() > 0.5 * (2 / fan) ** 0.5
    assert torch.equal(bias, torch.zeros_like(bias))


REFUSED = {
    "adaptive": (
        dict(decoder_ode_method="dopri5"),
        "'dopri5' is not a fixed-grid method; choose one of: euler, .*adaptive solvers cannot run a causal decoder",
    ),
    "coefficients": (dict(ode_coefficients="gated"), "ode_coefficients 'gated' is not valid; choose one of: fixed"),
    "dlcl": (dict(decoder_ode_corrector="dlcl"), "'dlcl' .* exists for encoders only, .* use 'multistep'"),
    "steps": (dict(decoder_ode_steps=0), "decoder_ode_steps must be a positive integer, got 0"),
    "sublayer-field": (
        dict(ode_scope="sublayer", ode_field="whole-layer"),
        "ode_scope 'sublayer' .* ode_field 'whole-layer' does not describe: use ode_field 'residual-branch'",
    ),
    "sublayer-corrector": (
        dict(ode_scope="sublayer", decoder_ode_corrector="multistep"),
        "corrects whole-block steps: use ode_scope 'block'",
    ),
}


@pytest.mark.parametrize("ode, message", REFUSED.values(), ids=REFUSED.keys())
def test_settings_no_decoder_takes_are_refused_naming_the_fix(ode, message):
    with pytest.raises(ValueError, match=message):
        ode_model("llama", **ode)
