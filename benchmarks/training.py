"""Training throughput and peak memory of L-L models, and per-stage activation checkpointing.

One training step = zero_grad, forward, label-smoothed cross-entropy (ε = 0.1; language models:
ε = 0, fairseq's cross-entropy), backward, Adam step, on the same synthetic batch for every
model. Throughput counts target tokens.
Peak memory = parameters + Adam state + the peak the step allocates on top (gradients and
activations), see :mod:`benchmarks.measure`.
"""

from __future__ import annotations

import statistics
from typing import Dict, List, Mapping, Optional, Protocol, Tuple

import torch
from fairseq.criterions.label_smoothed_cross_entropy import label_smoothed_nll_loss
from torch import nn

from benchmarks.context import RunContext
from benchmarks.data import synthetic_batch
from benchmarks.measure import (
    OptimizerStep,
    model_and_optimizer_bytes,
    peak_extra_bytes,
    ratio_row,
)
from benchmarks.models import ModelSpec, ode, transformer
from benchmarks.table import Row

MIB = 2.0**20
TRAINING_SPEED = "target tokens/s (train step)"


class Batch(Protocol):
    """What a training step reads: the model's inputs, the targets and their padding index."""

    net_input: Mapping[str, torch.Tensor]
    target: torch.Tensor
    pad: int


class TrainingStep(OptimizerStep):
    """zero_grad; forward; label-smoothed NLL; backward; Adam step."""

    def __init__(self, model: nn.Module, batch: Batch, context: RunContext, label_smoothing: float = 0.1) -> None:
        super().__init__(model, context, torch.optim.Adam(model.parameters(), lr=1e-4))
        self.batch = batch
        self.label_smoothing = label_smoothing

    def loss(self) -> torch.Tensor:
        out = self.model(**self.batch.net_input)
        lprobs = self.model.get_normalized_probs(out, log_probs=True)
        loss, _ = label_smoothed_nll_loss(
            lprobs.view(-1, lprobs.size(-1)),
            self.batch.target.view(-1),
            self.label_smoothing,
            ignore_index=self.batch.pad,
        )
        return loss

    def peak_bytes(self) -> int:
        """Peak bytes of a training step, parameters and optimizer state included."""
        self.prepare()
        self.optimizer.zero_grad(set_to_none=True)
        held = model_and_optimizer_bytes(self.model, self.optimizer)
        return held + peak_extra_bytes(self.run, self.context.device)


def measure_steps(
    context: RunContext, steps: Mapping[str, TrainingStep], iters: int
) -> Tuple[Dict[str, List[float]], Dict[str, int]]:
    """Each step's seconds per round (interleaved) and its peak memory."""
    times = context.time(steps, iters)
    context.log("measuring peak memory of one training step per model")
    return times, {label: step.peak_bytes() for label, step in steps.items()}


def training_specs(layers: int) -> Dict[str, ModelSpec]:
    shape = f"{layers}-{layers}"
    specs = [
        transformer(f"transformer {shape}", layers, layers),
        ode(f"euler {shape}", layers, layers),
        ode(f"rk2 {shape}", layers, layers, "heun"),
        ode(f"rk2-learned {shape}", layers, layers, "heun", ode_coefficients="learned"),
        ode(f"rk4 {shape}", layers, layers, "rk4"),
        ode(f"rk4 {shape} ckpt-stages", layers, layers, "rk4", ode_checkpoint_stages=True),
    ]
    return {s.label: s for s in specs}


def run_training(context: RunContext) -> List[Row]:
    s = context.settings
    batch = synthetic_batch(context.dictionary, s.batch_sentences, s.source_len, s.seed)
    batch = batch.to(context.device)
    context.notes.append(
        f"training batch: {s.batch_sentences} synthetic pairs, {batch.source_tokens} source / "
        f"{batch.target_tokens} target tokens, lengths {(3 * s.source_len) // 4}-{s.source_len}"
    )
    specs = training_specs(s.layers)
    steps = {label: TrainingStep(context.build(spec), batch, context) for label, spec in specs.items()}
    times, peaks = measure_steps(context, steps, s.train_iters)

    base = next(iter(specs))
    rows: List[Row] = []
    for label in specs:
        if label == base:
            continue
        section = "checkpointing" if "ckpt" in label else "training"
        euler = label.startswith("euler")
        speed_target = (">=", 0.95) if euler else None
        memory_target = ("<=", 1.2) if section == "checkpointing" else (("<=", 1.05) if euler else None)
        rows += speed_and_memory_rows(
            section, label, base, times, peaks, batch.target_tokens, TRAINING_SPEED, speed_target, memory_target
        )
    return rows


def speed_and_memory_rows(
    section: str,
    label: str,
    base: str,
    times: Mapping[str, List[float]],
    peaks: Mapping[str, int],
    tokens: int,
    metric: str,
    speed_target: Optional[tuple] = None,
    memory_target: Optional[tuple] = None,
) -> List[Row]:
    """Two rows of ``label`` against ``base``: the speed ratio (``tokens`` per step, from the
    per-round ``times``) and the peak-memory ratio of a training step."""
    rate = {name: tokens / statistics.median(times[name]) for name in (label, base)}
    return [
        ratio_row(section, label, base, metric, times, speed_target, f"{rate[label]:.0f} vs {rate[base]:.0f} tok/s"),
        Row(
            section,
            f"{label} / {base}",
            "peak training memory",
            peaks[label] / peaks[base],
            memory_target,
            f"{peaks[label] / MIB:.0f} vs {peaks[base] / MIB:.0f} MiB",
        ),
    ]
