"""ode_seq.transformers against transformers' own model at the same layer evaluations.

An ODE Llama of L blocks whose method evaluates each layer n times per block (Euler 1, RK2 2,
RK4 4, PCformer's RK2 with its corrector 3) against a ``LlamaForCausalLM`` of n·L layers, both of
the same width, vocabulary and random initialisation: both run n·L layer evaluations per token,
so a ratio plain time / ODE time below 1 is what the ODE block costs on top of them (stage sums,
the stage weights, one key/value cache per evaluation).

hf-training: one step = zero_grad, forward with ``labels`` (transformers' causal-LM loss),
backward, AdamW step, on ``--hf-batch`` random sequences of ``--hf-seq-len`` tokens, no cache.
hf-decoding: ``generate()`` greedy with the cache (one cache per evaluation for the ODE model),
``--hf-new-tokens`` tokens forced (min = max) after a random prompt of ``--hf-prompt-len`` tokens,
at batch 1 and at ``--hf-batch``; the time includes the prompt's forward pass.
"""

from __future__ import annotations

from typing import Dict, List, Tuple

import torch
from torch import Tensor, nn
from transformers import LlamaConfig, LlamaForCausalLM

from benchmarks.context import RunContext
from benchmarks.measure import OptimizerStep, Workload, ratio_row
from benchmarks.table import Row
from ode_seq.transformers import ODELlamaConfig, ODELlamaForCausalLM

SAME_EVALUATIONS = (">=", 0.95)
# label: (ODE settings, layer evaluations per block)
METHODS: Dict[str, Tuple[Dict[str, str], int]] = {
    "euler": ({"decoder_ode_method": "euler"}, 1),
    "rk2": ({"decoder_ode_method": "heun"}, 2),
    "rk2-learned": ({"decoder_ode_method": "heun", "ode_coefficients": "learned"}, 2),
    "rk4": ({"decoder_ode_method": "rk4"}, 4),
    "pcformer": ({"decoder_ode_method": "heun", "ode_coefficients": "ema", "decoder_ode_corrector": "multistep"}, 3),
}


def llama_options(context: RunContext, layers: int) -> Dict[str, object]:
    s = context.settings
    return dict(
        hidden_size=s.embed_dim,
        intermediate_size=s.ffn_dim,
        num_attention_heads=s.heads,
        num_key_value_heads=s.heads,
        num_hidden_layers=layers,
        vocab_size=s.hf_vocab,
        max_position_embeddings=max(s.hf_seq_len, s.hf_prompt_len + s.hf_new_tokens),
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
    )


def build_models(context: RunContext) -> Tuple[Dict[str, nn.Module], List[Tuple[str, str, int]]]:
    """The ODE and plain models by label, and (ODE label, plain label, layer evaluations) pairs."""
    blocks = context.settings.hf_layers
    models: Dict[str, nn.Module] = {}
    pairs = []
    for method, (ode, n) in METHODS.items():
        torch.manual_seed(context.settings.seed)
        label = f"ode-llama {method} {blocks}L"
        models[label] = ODELlamaForCausalLM(ODELlamaConfig(**llama_options(context, blocks), **ode))
        plain = f"llama {n * blocks}L"
        if plain not in models:
            torch.manual_seed(context.settings.seed)
            models[plain] = LlamaForCausalLM(LlamaConfig(**llama_options(context, n * blocks)))
        pairs.append((label, plain, n * blocks))
    for model in models.values():
        model.to(context.device)
    return models, pairs


class TrainingStep(OptimizerStep):
    """zero_grad; forward with labels (the model's own loss); backward; AdamW step."""

    def __init__(self, model: nn.Module, tokens: Tensor, context: RunContext) -> None:
        super().__init__(model, context, torch.optim.AdamW(model.parameters(), lr=1e-4))
        self.tokens = tokens

    def loss(self) -> Tensor:
        return self.model(input_ids=self.tokens, labels=self.tokens, use_cache=False).loss


class Generation(Workload):
    """Greedy ``generate()`` with the cache, exactly ``new_tokens`` tokens after the prompts."""

    def __init__(self, model: nn.Module, prompts: Tensor, new_tokens: int, context: RunContext) -> None:
        self.model, self.prompts, self.new_tokens, self.context = model, prompts, new_tokens, context

    def prepare(self) -> None:
        self.model.eval()

    def run(self) -> None:
        with torch.no_grad(), self.context.autocast():
            out = self.model.generate(
                input_ids=self.prompts,
                attention_mask=torch.ones_like(self.prompts),
                do_sample=False,
                max_new_tokens=self.new_tokens,
                min_new_tokens=self.new_tokens,
                use_cache=True,
            )
        assert out.size(1) == self.prompts.size(1) + self.new_tokens


def random_tokens(context: RunContext, batch: int, length: int) -> Tensor:
    generator = torch.Generator().manual_seed(context.settings.seed)
    return torch.randint(3, context.settings.hf_vocab, (batch, length), generator=generator).to(context.device)


def ratio_rows(
    section: str, metric: str, times: Dict[str, List[float]], pairs: List[Tuple[str, str, int]]
) -> List[Row]:
    return [
        ratio_row(section, ode, plain, metric, times, SAME_EVALUATIONS, f"{n} layer evaluations each")
        for ode, plain, n in pairs
    ]


def run_hf_training(context: RunContext) -> List[Row]:
    s = context.settings
    models, pairs = build_models(context)
    tokens = random_tokens(context, s.hf_batch, s.hf_seq_len)
    context.notes.append(
        f"hf-training: Llama-family d={s.embed_dim}, FFN {s.ffn_dim}, {s.heads} heads, vocabulary {s.hf_vocab}, "
        f"batch {s.hf_batch} x {s.hf_seq_len} tokens, AdamW"
    )
    times = context.time({label: TrainingStep(m, tokens, context) for label, m in models.items()}, s.train_iters)
    return ratio_rows("hf-training", "tokens/s (train step)", times, pairs)


def run_hf_decoding(context: RunContext) -> List[Row]:
    s = context.settings
    models, pairs = build_models(context)
    context.notes.append(
        f"hf-decoding: greedy generate(), {s.hf_new_tokens} new tokens after {s.hf_prompt_len} prompt tokens, "
        "DynamicCache (the ODE model: one cache per evaluation)"
    )
    rows: List[Row] = []
    for batch in sorted({1, s.hf_batch}):
        prompts = random_tokens(context, batch, s.hf_prompt_len)
        workloads = {label: Generation(m, prompts, s.hf_new_tokens, context) for label, m in models.items()}
        times = context.time(workloads, s.gen_iters)
        rows.extend(ratio_rows("hf-decoding", f"generated tokens/s (batch {batch})", times, pairs))
    return rows
