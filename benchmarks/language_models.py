"""Language models: fairseq's pre-norm ``transformer_lm`` against ``ode_transformer_lm`` at the
same number of layer evaluations per token (an RK-n LM of L blocks against a transformer_lm of
n·L layers; both have one embedding and one output projection), and at the same parameters
(L layers).

lm-training: one training step (as in :mod:`benchmarks.training`, cross-entropy) on blocks of
``--lm-sample-len`` random words; target tokens/s and peak memory; RK4 with
``--ode-checkpoint-stages`` against RK4 without (the memory it saves) and against the
transformer_lm of 4L layers.
lm-generation: fairseq's SequenceGenerator sampling (top-k 10, one hypothesis per prompt) after
prompts of ``--lm-prompt-len`` words; every continuation is forced to ``--gen-max-len`` tokens
(min_len = max_len), so every model runs the same decoder steps; generated tokens/s.
"""

from __future__ import annotations

import statistics
from typing import Dict, List, Tuple

import torch
from fairseq import search
from fairseq.data import Dictionary
from fairseq.sequence_generator import SequenceGenerator
from torch import Tensor, nn

from benchmarks.context import RunContext
from benchmarks.data import language_model_batch, language_model_prompts
from benchmarks.measure import Workload, ratio_row
from benchmarks.models import ModelSpec, ode_lm, transformer_lm
from benchmarks.table import Row
from benchmarks.training import TRAINING_SPEED, TrainingStep, measure_steps, speed_and_memory_rows

SAME_EVALUATIONS = (">=", 0.95)  # the RK overhead target of the rk-overhead section
STEP_OVERHEAD = (">=", round(1 / 1.1, 2))  # the decoder-step section's: an RK-n step within 1.1·n layer steps
TOP_K = 10


def vanilla(layers: int) -> ModelSpec:
    return transformer_lm(f"transformer_lm {layers}L", layers)


def ode_specs(layers: int) -> Dict[str, Tuple[ModelSpec, int]]:
    """The ODE LMs of ``layers`` blocks and the layer evaluations of one block."""
    specs = [
        (ode_lm(f"euler {layers}L", layers), 1),
        (ode_lm(f"rk2 {layers}L", layers, "heun"), 2),
        (ode_lm(f"rk2-learned {layers}L", layers, "heun", ode_coefficients="learned"), 2),
        (ode_lm(f"rk4 {layers}L", layers, "rk4"), 4),
        (ode_lm(f"rk4 {layers}L ckpt-stages", layers, "rk4", ode_checkpoint_stages=True), 4),
    ]
    return {spec.label: (spec, n) for spec, n in specs}


def run_lm_training(context: RunContext) -> List[Row]:
    s = context.settings
    batch = language_model_batch(context.dictionary, s.lm_blocks, s.lm_sample_len, s.seed).to(context.device)
    context.notes.append(
        f"language-model training batch: {s.lm_blocks} blocks of {s.lm_sample_len} random words "
        f"({batch.target_tokens} target tokens), input and output embeddings tied"
    )
    odes = ode_specs(s.layers)
    specs = [vanilla(s.layers * n) for n in (1, 2, 4)] + [spec for spec, _ in odes.values()]
    steps = {spec.label: TrainingStep(context.build(spec), batch, context, label_smoothing=0.0) for spec in specs}
    times, peaks = measure_steps(context, steps, s.train_iters)

    def rows(section: str, label: str, base: str, speed_target=None, memory_target=None) -> List[Row]:
        return speed_and_memory_rows(
            section, label, base, times, peaks, batch.target_tokens, TRAINING_SPEED, speed_target, memory_target
        )

    result: List[Row] = []
    trained = {label: n for label, (_, n) in odes.items() if "ckpt" not in label}
    for label, n in trained.items():
        memory_target = ("<=", 1.05) if n == 1 else None
        result += rows("lm-training", label, vanilla(s.layers * n).label, SAME_EVALUATIONS, memory_target)
    for label, n in trained.items():
        if n > 1:
            result += rows("lm-training", label, vanilla(s.layers).label)
    rk4 = f"rk4 {s.layers}L"
    result += rows("lm-checkpointing", f"{rk4} ckpt-stages", vanilla(4 * s.layers).label)
    result += rows("lm-checkpointing", f"{rk4} ckpt-stages", rk4)
    return result


class Sampling(Workload):
    """``generator.generate`` continuing every prompt to a fixed length."""

    def __init__(
        self, model: nn.Module, dictionary: Dictionary, prompts: Tensor, new: int, context: RunContext
    ) -> None:
        length = prompts.size(1) + new
        sampling = search.Sampling(dictionary, sampling_topk=TOP_K)
        self.generator = SequenceGenerator(
            [model], dictionary, beam_size=1, max_len_a=0, max_len_b=length, min_len=length, search_strategy=sampling
        )
        lengths = torch.full((prompts.size(0),), prompts.size(1), device=prompts.device)
        self.sample = {"net_input": {"src_tokens": prompts, "src_lengths": lengths}}
        self.model, self.prompts, self.context = model, prompts, context

    def prepare(self) -> None:
        self.model.eval()

    def run(self) -> None:
        with torch.no_grad(), self.context.autocast():
            self.generator.generate([self.model], self.sample, prefix_tokens=self.prompts)


def run_lm_generation(context: RunContext) -> List[Row]:
    s = context.settings
    prompts, origin = language_model_prompts(context.dictionary, s)
    context.notes.append(
        f"language-model generation: {origin}, each continued by exactly {s.gen_max_len} tokens "
        f"sampled from the top {TOP_K}"
    )
    prompts = prompts.to(context.device)
    odes = {label: (spec, n) for label, (spec, n) in ode_specs(s.layers).items() if "ckpt" not in label}
    specs = [vanilla(s.layers * n) for n in (1, 2, 4)] + [spec for spec, _ in odes.values()]
    workloads: Dict[str, Workload] = {
        spec.label: Sampling(context.build(spec), context.dictionary, prompts, s.gen_max_len, context) for spec in specs
    }
    times = context.time(workloads, s.gen_iters)
    tokens = prompts.size(0) * s.gen_max_len
    rate = {label: tokens / statistics.median(t) for label, t in times.items()}
    rows = []
    for label, (_, n) in odes.items():
        base = vanilla(s.layers * n).label
        rows.append(
            ratio_row(
                "lm-generation",
                label,
                base,
                "generated tokens/s (sampling)",
                times,
                STEP_OVERHEAD,
                f"{rate[label]:.0f} vs {rate[base]:.0f} tok/s",
            )
        )
    return rows
