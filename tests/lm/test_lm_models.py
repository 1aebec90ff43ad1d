"""ODE language models: Euler is fairseq's pre-norm ``transformer_lm``, RK LMs are their formulas,
incremental decoding (with beam reorders) equals the full forward for every method and kind."""

from __future__ import annotations

import math
from typing import Callable, List, Sequence

import pytest
import torch
import torch.nn.functional as F
from fairseq import tasks

from ode_seq.fields import FIELD_FORMS
from ode_seq.solvers import COEFFICIENT_MODES, TABLEAUS
from testkit.in_process import parse_training_args
from tests.lm.conftest import TINY_TIME, build_lm, lm_training_args
from tests.numerics import assert_computes

KINDS = {
    "standard": ("ode_transformer_lm", {}),
    "time-dependent": ("ode_transformer_lm_nonauto", TINY_TIME),
    "stable": ("stable_ode_transformer_lm", {}),
}


def log_probs(model, tokens: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return model.get_normalized_probs(model(tokens), log_probs=True)


def random_tokens(batch: int, length: int, vocab: int = 30, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(4, vocab + 4, (batch, length), generator=g)  # 4 specials, none of them here


def fairseq_model(lm_data, arch: str, *options: str):
    """The model fairseq-train builds for ``--arch arch`` and ``options`` at tiny sizes."""
    cfg = parse_training_args(lm_training_args(lm_data, arch, {}, extra=options))
    return tasks.setup_task(cfg.task).build_model(cfg.model), cfg.model


@pytest.mark.numerics
def test_euler_lm_equals_fairseqs_prenorm_transformer_lm_weight_for_weight(lm_data):
    # transformer_lm's input and output dims default to 512 whatever --decoder-embed-dim says.
    dims = ("--decoder-input-dim", "32", "--decoder-output-dim", "32")
    vanilla, vanilla_cfg = fairseq_model(lm_data, "transformer_lm", "--decoder-normalize-before", *dims)
    ode, _ = fairseq_model(lm_data, "ode_transformer_lm_euler")
    ode.load_state_dict(vanilla.state_dict())  # the same parameter names, strict
    tokens = random_tokens(3, 9, vocab=len(vanilla.decoder.dictionary) - 4)
    expected = log_probs(vanilla.eval(), tokens)
    assert_computes(ode.eval(), lambda: log_probs(ode, tokens), expected)
    assert vanilla_cfg.decoder_normalize_before


def test_fairseqs_plain_transformer_lm_is_post_norm_and_ode_lms_are_pre_norm(lm_data):
    _, plain = fairseq_model(lm_data, "transformer_lm")
    _, ode = fairseq_model(lm_data, "ode_transformer_lm_rk4")
    assert plain.decoder_normalize_before is False
    assert ode.decoder_normalize_before is True


def pre_norm_branch(layer, z: torch.Tensor, field: str = "residual-branch") -> torch.Tensor:
    """F(z) of a pre-norm causal decoder layer without its identity, in plain torch (z: T×B×C):
    residual-branch a + f(z + a), parallel-branch a + f(z), with a = W_o·Attn(LN₁ z) and
    f(x) = W₂·act(W₁·LN₂ x)."""
    T, B, C = z.shape
    attention = layer.self_attn
    H = attention.num_heads
    d = C // H

    def heads(x: torch.Tensor) -> torch.Tensor:  # T×B×C -> (B·H)×T×d
        return x.reshape(T, B * H, d).transpose(0, 1)

    u = F.layer_norm(z, (C,), layer.self_attn_layer_norm.weight, layer.self_attn_layer_norm.bias, 1e-5)
    q = heads(F.linear(u, attention.q_proj.weight, attention.q_proj.bias) * d**-0.5)
    k = heads(F.linear(u, attention.k_proj.weight, attention.k_proj.bias))
    v = heads(F.linear(u, attention.v_proj.weight, attention.v_proj.bias))
    future = torch.triu(torch.ones(T, T, dtype=torch.bool), 1)
    weights = torch.softmax((q @ k.transpose(1, 2)).masked_fill(future, -math.inf), dim=-1)
    a = F.linear((weights @ v).transpose(0, 1).reshape(T, B, C), attention.out_proj.weight, attention.out_proj.bias)
    x = z + a if field == "residual-branch" else z
    w = F.layer_norm(x, (C,), layer.final_layer_norm.weight, layer.final_layer_norm.bias, 1e-5)
    f = F.linear(F.relu(F.linear(w, layer.fc1.weight, layer.fc1.bias)), layer.fc2.weight, layer.fc2.bias)
    return a + f


def lm_from_formula(model, tokens: torch.Tensor, step: Callable[[object, torch.Tensor], torch.Tensor]) -> torch.Tensor:
    """Log-probabilities of the LM ``x_{l+1} = step(layer_l, x_l)`` with ``model``'s embeddings,
    final LayerNorm and output projection."""
    decoder = model.decoder
    x = decoder.embed_scale * F.embedding(tokens, decoder.embed_tokens.weight) + decoder.embed_positions(tokens)
    x = x.transpose(0, 1)
    for layer in decoder.layers:
        x = step(layer, x)
    norm = decoder.layer_norm
    x = F.layer_norm(x, (x.size(-1),), norm.weight, norm.bias, 1e-5).transpose(0, 1)
    return torch.log_softmax(F.linear(x, decoder.output_projection.weight), dim=-1)


def heun(layer, y):
    k1 = pre_norm_branch(layer, y)
    k2 = pre_norm_branch(layer, y + k1)
    return y + (k1 + k2) / 2


def rk4(layer, y):
    k1 = pre_norm_branch(layer, y)
    k2 = pre_norm_branch(layer, y + k1 / 2)
    k3 = pre_norm_branch(layer, y + k2 / 2)
    k4 = pre_norm_branch(layer, y + k3)
    return y + (k1 + 2 * k2 + 2 * k3 + k4) / 6


def learned_gate(layer, y):
    k1 = pre_norm_branch(layer, y)
    k2 = pre_norm_branch(layer, y + k1)
    proj = layer.combiner.proj
    g = torch.sigmoid(F.linear(torch.cat([k1, k2], dim=-1), proj.weight, proj.bias))
    return y + g * k1 + (1 - g) * k2


def kutta3(layer, y):
    k1 = pre_norm_branch(layer, y)
    k2 = pre_norm_branch(layer, y + k1 / 2)
    k3 = pre_norm_branch(layer, y - k1 + 2 * k2)
    return y + (k1 + 4 * k2 + k3) / 6


def iterated_implicit_euler_2(layer, y):
    x = y + pre_norm_branch(layer, y)
    for _ in range(2):
        x = y + pre_norm_branch(layer, x)
    return x


def ema_heun(layer, y):  # PCformer's weights w = (β(1-β), β) at β = layer's
    beta = layer.combiner.beta
    k1 = pre_norm_branch(layer, y)
    k2 = pre_norm_branch(layer, y + k1)
    return y + beta * (1 - beta) * k1 + beta * k2


def parallel_euler(layer, y):
    return y + pre_norm_branch(layer, y, "parallel-branch")


FORMULAS = {
    # arch, options, formula
    "rk2 (heun)": ("ode_transformer_lm_rk2", {}, heun),
    "rk2 learned gate": ("ode_transformer_lm_rk2_learned", {}, learned_gate),
    "rk3 (Kutta)": ("ode_transformer_lm_rk4", dict(decoder_ode_method="rk3"), kutta3),
    "rk4": ("ode_transformer_lm_rk4", {}, rk4),
    "iie2": ("ode_transformer_lm_rk4", dict(decoder_ode_method="iie2"), iterated_implicit_euler_2),
    "ema heun": ("ode_transformer_lm_rk2", dict(ode_coefficients="ema"), ema_heun),
    "parallel field": ("ode_transformer_lm_parallel", {}, parallel_euler),
}


@pytest.mark.numerics
@pytest.mark.parametrize("name", FORMULAS)
def test_rk_lm_equals_its_formula_in_plain_torch(name):
    arch, options, formula = FORMULAS[name]
    model = build_lm(arch, **options).eval()
    with torch.no_grad():
        for block in model.decoder.layers:  # move gates and EMA weights off their initial values
            for p in getattr(block, "combiner", torch.nn.Module()).parameters():
                p.add_(0.1 * torch.randn_like(p) if p.dim() else torch.tensor(-0.2))
        tokens = random_tokens(2, 7)
        expected = lm_from_formula(model, tokens, formula)
    assert_computes(model, lambda: log_probs(model, tokens), expected)


def pcformer_rk4(history_length: int) -> Callable[[object, torch.Tensor], torch.Tensor]:
    """PCformer's block as a formula over the stack: an RK4 predictor with EMA weights
    w_i = β(1−β)^{4−i}, then y' = y + α F(P) + Σ_{j=0}^{m} β_j k_1^{(l−j)}, the first-stage values
    of this block and the m before it (block 0's standing in for those before the stack)."""
    first_stages: List[torch.Tensor] = []

    def step(layer, y):
        ema, alpha, beta = layer.combiner.beta, layer.corrector.alpha, layer.corrector.beta
        k1 = pre_norm_branch(layer, y)
        k2 = pre_norm_branch(layer, y + k1 / 2)
        k3 = pre_norm_branch(layer, y + k2 / 2)
        k4 = pre_norm_branch(layer, y + k3)
        w = [ema * (1 - ema) ** (4 - i) for i in range(1, 5)]
        prediction = y + w[0] * k1 + w[1] * k2 + w[2] * k3 + w[3] * k4
        first_stages.append(k1)
        history = [first_stages[max(len(first_stages) - 1 - j, 0)] for j in range(history_length + 1)]
        return y + alpha * pre_norm_branch(layer, prediction) + sum(b * k for b, k in zip(beta, history))

    return step


@pytest.mark.numerics
def test_pcformer_lm_equals_its_formula_in_plain_torch():
    model = build_lm("ode_transformer_lm_pcformer", decoder_layers=4, decoder_ode_corrector_history=1).eval()
    generator = torch.Generator().manual_seed(3)
    with torch.no_grad():
        for name, p in model.named_parameters():  # off the initial EMA β and uniform α, β_j
            if ".combiner." in name or ".corrector." in name:
                p.add_(0.2 * torch.randn(p.shape, generator=generator))
        tokens = random_tokens(2, 7)
        expected = lm_from_formula(model, tokens, pcformer_rk4(history_length=1))
    assert_computes(model, lambda: log_probs(model, tokens), expected)


@pytest.mark.numerics
@pytest.mark.parametrize("kind", ["standard", "time-dependent"])
def test_predictor_corrector_incremental_decoding_with_beam_reorders_equals_full_forward(kind):
    arch, options = KINDS[kind]
    pc = dict(decoder_ode_method="heun", ode_coefficients="ema", decoder_ode_corrector="multistep")
    model = build_lm(arch, decoder_layers=3, decoder_ode_corrector_history=1, **pc, **options)
    assert_incremental_equals_full(model)


def incremental_with_reorders(model, tokens: torch.Tensor, orders: Sequence[tuple]) -> tuple:
    """Log-probabilities decoded one position at a time, the batch reordered before position
    ``at`` by ``order`` for every (at, order) in ``orders`` (as beam search does); returns them
    and the token rows they belong to."""
    state: dict = {}
    steps: List[torch.Tensor] = []
    reorders = dict(orders)
    with torch.no_grad():
        for t in range(tokens.size(1)):
            if t in reorders:
                order = torch.tensor(reorders[t])
                model.decoder.reorder_incremental_state_scripting(state, order)
                tokens = tokens[order]
                steps = [s[order] for s in steps]
            out = model.decoder(tokens[:, : t + 1], incremental_state=state)
            steps.append(model.get_normalized_probs(out, log_probs=True))
    return torch.cat(steps, dim=1), tokens


# A permutation, then a beam-style selection (rows repeated and dropped).
REORDERS = ((3, (2, 0, 3, 1)), (6, (1, 1, 0, 2)))


def assert_incremental_equals_full(model) -> None:
    """Decoding one position at a time with reorders gives the full pass's log-probabilities up to
    rounding over the layer evaluations of the full pass."""
    tokens = random_tokens(4, 9, seed=1)
    incremental, rows = incremental_with_reorders(model.eval(), tokens, REORDERS)
    assert_computes(model, lambda: log_probs(model, rows), incremental)


@pytest.mark.numerics
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("method", TABLEAUS)
def test_incremental_decoding_with_beam_reorders_equals_full_forward(kind, method):
    arch, options = KINDS[kind]
    model = build_lm(arch, decoder_ode_method=method, **options)
    assert_incremental_equals_full(model)


@pytest.mark.numerics
@pytest.mark.parametrize("field", FIELD_FORMS)
@pytest.mark.parametrize("mode", [m for m in COEFFICIENT_MODES if m != "fixed"])
def test_incremental_decoding_equals_full_forward_with_learned_coefficients_and_fields(mode, field):
    model = build_lm("ode_transformer_lm_rk4", ode_coefficients=mode, ode_field=field)
    assert_incremental_equals_full(model)


@pytest.mark.numerics
@pytest.mark.parametrize(
    "options",
    [
        dict(ode_scope="sublayer", decoder_ode_method="rk4"),
        dict(decoder_share_group_size=2, decoder_ode_steps=3, decoder_ode_method="heun"),
        dict(decoder_layer_history="learnable_dense", decoder_ode_method="heun"),
        dict(decoder_relative_positions=3, decoder_ode_method="heun"),
        dict(attention_kernel="l2", decoder_ode_method="rk4"),
    ],
    ids=["sublayer", "shared-group", "layer-history", "relative-positions", "l2-attention"],
)
def test_incremental_decoding_equals_full_forward_with_stack_options(options):
    arch = "stable_ode_transformer_lm" if "attention_kernel" in options else "ode_transformer_lm"
    assert_incremental_equals_full(build_lm(arch, **options))


def test_a_transformer_lm_checkpoint_fine_tunes_into_learned_gates_and_loads_nowhere_else():
    euler = build_lm("ode_transformer_lm_euler").state_dict()
    gated = build_lm("ode_transformer_lm_rk2_learned", finetune_from_model="euler.pt")
    state = dict(euler)
    gated.upgrade_state_dict_named(state, "")  # fairseq's loading does this before load_state_dict
    gated.load_state_dict(state)  # strict: the gates start at the model's initial values
    assert {k for k in state if k not in euler} == {k for k in gated.state_dict() if ".combiner." in k} != set()
    with pytest.raises(RuntimeError, match=r"4 parameters missing from the checkpoint.*--finetune-from-model"):
        build_lm("ode_transformer_lm_rk2_learned").load_state_dict(euler)
