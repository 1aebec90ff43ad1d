"""Beam search with fairseq's SequenceGenerator: sentences per second of L-L models.

The models are randomly initialised, so where they stop would differ from model to model; to
compare equal work, every hypothesis is made exactly as long as the longest source
(min_len = max_len = that length, EOS forced there), so every model runs the same steps.
"""

from __future__ import annotations

import statistics
from typing import Dict, List

import torch
from fairseq.data import Dictionary
from fairseq.sequence_generator import SequenceGenerator
from torch import nn

from benchmarks.context import RunContext
from benchmarks.data import generation_sample
from benchmarks.measure import Workload, ratio_row
from benchmarks.models import ode, transformer
from benchmarks.table import Row


class BeamSearch(Workload):
    """``generator.generate`` on one batch of sources."""

    def __init__(
        self, model: nn.Module, dictionary: Dictionary, sample: Dict, beam: int, length: int, context: RunContext
    ) -> None:
        self.model = model
        self.sample = sample
        self.context = context
        self.generator = SequenceGenerator(
            [model],
            dictionary,
            beam_size=beam,
            max_len_a=0,
            max_len_b=length,
            min_len=length,
        )

    def prepare(self) -> None:
        self.model.eval()

    def run(self) -> None:
        with torch.no_grad(), self.context.autocast():
            self.generator.generate([self.model], self.sample)


class EncoderOnly(Workload):
    """The encoder pass that beam search makes once per batch."""

    def __init__(self, model: nn.Module, sample: Dict, context: RunContext) -> None:
        self.model = model
        self.net_input = sample["net_input"]
        self.context = context

    def prepare(self) -> None:
        self.model.eval()

    def run(self) -> None:
        with torch.no_grad(), self.context.autocast():
            self.model.encoder(self.net_input["src_tokens"], src_lengths=self.net_input["src_lengths"])


def _to(sample: Dict, device: torch.device) -> Dict:
    return {"net_input": {k: v.to(device) for k, v in sample["net_input"].items()}}


def run_generation(context: RunContext) -> List[Row]:
    s = context.settings
    sample, description = generation_sample(context.dictionary, s)
    length = int(sample["net_input"]["src_lengths"].max())
    context.notes.append(f"generation batch: {description}; beam {s.beam}; every hypothesis {length} tokens + EOS")
    sample = _to(sample, context.device)
    shape = f"{s.layers}-{s.layers}"
    specs = [
        transformer(f"transformer {shape}", s.layers, s.layers),
        ode(f"euler {shape}", s.layers, s.layers),
        ode(f"rk4 {shape}", s.layers, s.layers, "rk4"),
        ode(f"rk4-encdec {shape}", s.layers, s.layers, "rk4", "rk4"),
    ]
    models = {spec.label: context.build(spec) for spec in specs}
    workloads: Dict[str, Workload] = {
        label: BeamSearch(model, context.dictionary, sample, s.beam, length, context) for label, model in models.items()
    }
    base = specs[0].label
    encoder = f"{base} encoder only"
    workloads[encoder] = EncoderOnly(models[base], sample, context)
    times = context.time(workloads, s.gen_iters)
    sentences = len(sample["net_input"]["src_lengths"])
    rate = {label: sentences / statistics.median(t) for label, t in times.items()}
    targets = {specs[1].label: (">=", 0.95), specs[2].label: (">=", 0.85)}
    rows = [
        ratio_row(
            "generation",
            spec.label,
            base,
            f"sentences/s (beam {s.beam})",
            times,
            targets.get(spec.label),
            f"{rate[spec.label]:.2f} vs {rate[base]:.2f} sent/s",
        )
        for spec in specs[1:]
    ]
    # An RK4 encoder evaluates each layer 4 times: with free stepping, beam search would take
    # T + 3E (T: the vanilla search, E: its encoder pass), whatever the implementation.
    share = statistics.median(e / t for e, t in zip(times[encoder], times[base]))
    bound = statistics.median(t / (t + 3 * e) for e, t in zip(times[encoder], times[base]))
    rows.append(
        Row(
            "generation",
            f"{specs[2].label} / {base}",
            "sentences/s bound with free RK stepping (T/(T+3E))",
            bound,
            None,
            f"encoder E = {share:.1%} of the vanilla search T",
        )
    )
    return rows
