"""Tiny random models of every family of ode_seq.transformers and what their tests compare.

Weights of std 0.5, not the families' 0.02: a field that small is nearly linear, and every
method's step would come out within rounding of every other's. Comparisons whose claim is
exactness (incremental = full, generate with and without the cache) run in float64 and are
compared at float32 rounding (tests/numerics.py): in float32 these weights amplify a kernel's
rounding past that bound (measured: up to 4e-4 of logits of size 11 for 2 RK4 steps of Llama).
"""

from typing import Any, Callable, Dict, Tuple

import torch
from transformers import AutoConfig, AutoModelForCausalLM, PreTrainedModel

import ode_seq.transformers  # noqa: F401  (registers the ode_* model types)
from ode_seq.solvers.tableaus import get_tableau
from tests.numerics import assert_equal_up_to_rounding

VOCAB = 64
LLAMA_SIZES = dict(
    hidden_size=32,
    intermediate_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    vocab_size=VOCAB,
    initializer_range=0.5,
)
# The original family's model_type and its tiny sizes (Mistral's window shorter than the inputs).
FAMILY_SIZES: Dict[str, Tuple[str, Dict[str, Any]]] = {
    "llama": ("llama", LLAMA_SIZES),
    "qwen2": ("qwen2", LLAMA_SIZES),
    "mistral": ("mistral", dict(LLAMA_SIZES, sliding_window=4)),
    "gpt2": (
        "gpt2",
        dict(n_embd=32, n_layer=2, n_head=4, vocab_size=VOCAB, n_positions=64, initializer_range=0.5)
        | dict(bos_token_id=1, eos_token_id=2),
    ),
}
TOKENS = torch.randint(3, VOCAB, (2, 9), generator=torch.Generator().manual_seed(0))
LEFT_PADDED = torch.tensor([[0, 0, 0, 1, 1, 1, 1, 1, 1], [1] * 9])


def original(family: str) -> PreTrainedModel:
    """The family's own tiny model (seed 0, eval mode)."""
    model_type, sizes = FAMILY_SIZES[family]
    torch.manual_seed(0)
    return AutoModelForCausalLM.from_config(AutoConfig.for_model(model_type, **sizes)).eval()


def ode_model(family: str = "llama", dtype: torch.dtype = torch.float64, **ode: Any) -> PreTrainedModel:
    """A tiny ODE model of ``family`` with the ODE settings ``ode`` (seed 0, eval mode)."""
    _, sizes = FAMILY_SIZES[family]
    torch.manual_seed(0)
    config = AutoConfig.for_model(f"ode_{family}", **sizes, **ode)
    return AutoModelForCausalLM.from_config(config).eval().to(dtype)


def field_evaluations(config: Any) -> int:
    """Layer evaluations of one forward pass at one position: layers × steps × (stages, plus the
    corrector's)."""
    per_step = get_tableau(config.decoder_ode_method).stages + (config.decoder_ode_corrector != "none")
    return config.num_hidden_layers * config.decoder_ode_steps * per_step


def incremental_logits(model: PreTrainedModel, tokens: torch.Tensor, mask: torch.Tensor, prompt: int) -> torch.Tensor:
    """The logits of ``tokens`` from a pass over the first ``prompt`` positions, then one position
    at a time with the cache that pass returned."""
    with torch.no_grad():
        out = model(tokens[:, :prompt], attention_mask=mask[:, :prompt], use_cache=True)
        logits = [out.logits]
        for t in range(prompt, tokens.size(1)):
            out = model(tokens[:, t : t + 1], attention_mask=mask[:, : t + 1], cache=out.cache, use_cache=True)
            logits.append(out.logits)
    return torch.cat(logits, dim=1)


def assert_incremental_equals_full(model: PreTrainedModel, prompt: int = 3) -> None:
    """Step-by-step logits (after a prompt of ``prompt`` positions) = the full pass's, for a
    left-padded batch, up to float32 rounding over one pass's evaluations."""
    with torch.no_grad():
        full = model(TOKENS, attention_mask=LEFT_PADDED, use_cache=False).logits
    incremental = incremental_logits(model, TOKENS, LEFT_PADDED, prompt)
    assert_equal_up_to_rounding(incremental, full, field_evaluations(model.config), torch.float32)


Function = Callable[[torch.Tensor], torch.Tensor]


def sublayers(layer: torch.nn.Module, position_embeddings: Any) -> Tuple[Function, Function]:
    """(a, m) of a Llama-family layer, its own modules called directly: a(x) = SelfAttn(RMSNorm₁ x)
    (causal, no padding), m(x) = MLP(RMSNorm₂ x)."""

    def attention(x: torch.Tensor) -> torch.Tensor:
        normed = layer.input_layernorm(x)
        return layer.self_attn(normed, attention_mask=None, position_embeddings=position_embeddings)[0]

    def mlp(x: torch.Tensor) -> torch.Tensor:
        return layer.mlp(layer.post_attention_layernorm(x))

    return attention, mlp


def field(layer: torch.nn.Module, position_embeddings: Any) -> Function:
    """F(z) = a(z) + m(z + a(z)), a and m the layer's own sublayers called directly."""
    attention, mlp = sublayers(layer, position_embeddings)
    return lambda z: attention(z) + mlp(z + attention(z))


def heun(F: Function, y: torch.Tensor) -> torch.Tensor:
    k1 = F(y)
    k2 = F(y + k1)
    return y + (k1 + k2) / 2


def rk4(F: Function, y: torch.Tensor) -> torch.Tensor:
    k1 = F(y)
    k2 = F(y + k1 / 2)
    k3 = F(y + k2 / 2)
    k4 = F(y + k3)
    return y + (k1 + 2 * k2 + 2 * k3 + k4) / 6
