"""RK overhead: an RK-n encoder of L blocks against fairseq's encoder of n·L layers.

Both evaluate n·L layers per sentence, so a ratio below 1 is what the Runge–Kutta stepping
costs on top of its layer evaluations (stage sums, output combination, branch recording).
Measured as a training pass (forward + backward of mean(h²), no optimizer: the vanilla
encoder has n times the parameters) and as an eval-mode forward pass.
"""

from __future__ import annotations

from typing import Dict, List

import torch
from torch import nn

from benchmarks.context import RunContext
from benchmarks.data import TrainingBatch, synthetic_batch
from benchmarks.measure import Workload, median_ratio, spread
from benchmarks.models import ode, transformer
from benchmarks.table import Row

METHODS = ((1, "euler"), (2, "heun"), (4, "rk4"))


class EncoderPass(Workload):
    """The encoder on the batch's sources; with ``backward``, then backward of mean(h²)."""

    def __init__(self, encoder: nn.Module, batch: TrainingBatch, context: RunContext, backward: bool) -> None:
        self.encoder = encoder
        self.batch = batch
        self.context = context
        self.backward = backward

    def prepare(self) -> None:
        self.encoder.train(self.backward)
        self.encoder.zero_grad(set_to_none=True)

    def run(self) -> None:
        with torch.set_grad_enabled(self.backward), self.context.autocast():
            out = self.encoder(self.batch.src_tokens, src_lengths=self.batch.src_lengths)
            h = out["encoder_out"][0]
        if self.backward:
            h.float().square().mean().backward()


def run_rk_overhead(context: RunContext) -> List[Row]:
    s = context.settings
    blocks = s.rk_blocks
    batch = synthetic_batch(context.dictionary, s.batch_sentences, s.source_len, s.seed)
    batch = batch.to(context.device)
    encoders: Dict[str, nn.Module] = {}
    pairs = []
    for n, method in METHODS:
        rk = f"{method} encoder {blocks} blocks"
        vanilla = f"transformer encoder {n * blocks} layers"
        encoders[rk] = context.build(ode(rk, blocks, 1, method)).encoder
        encoders[vanilla] = context.build(transformer(vanilla, n * blocks, 1)).encoder
        pairs.append((n, rk, vanilla))

    rows: List[Row] = []
    for backward, metric in ((True, "source tokens/s (fwd+bwd)"), (False, "source tokens/s (eval forward)")):
        workloads = {label: EncoderPass(enc, batch, context, backward) for label, enc in encoders.items()}
        times = context.time(workloads, s.train_iters)
        for n, rk, vanilla in pairs:
            rows.append(
                Row(
                    "rk-overhead",
                    f"{rk} / {vanilla}",
                    metric,
                    median_ratio(times[vanilla], times[rk]),
                    (">=", 0.95),
                    f"{n * blocks} layer evaluations each; {spread(times[vanilla], times[rk])}",
                )
            )
    return rows
