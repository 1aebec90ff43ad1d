"""What every section of a run shares: settings, device, dictionary, results, progress log."""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from typing import ContextManager, Dict, List, Mapping

import torch
from fairseq.data import Dictionary
from torch import nn

from benchmarks.measure import Workload, autocast, interleaved_times
from benchmarks.models import ModelSpec, build
from benchmarks.settings import Settings
from benchmarks.table import Row


@dataclass
class RunContext:
    settings: Settings
    dictionary: Dictionary
    notes: List[str] = field(default_factory=list)
    rows: List[Row] = field(default_factory=list)
    started: float = field(default_factory=time.perf_counter)

    @property
    def device(self) -> torch.device:
        return torch.device(self.settings.device)

    def autocast(self) -> ContextManager:
        return autocast(self.device, self.settings.dtype)

    def log(self, message: str) -> None:
        print(f"[{time.perf_counter() - self.started:7.1f}s] {message}", file=sys.stderr, flush=True)

    def build(self, spec: ModelSpec) -> nn.Module:
        return build(spec, self.settings, self.dictionary)

    def time(self, workloads: Mapping[str, Workload], iters: int) -> Dict[str, List[float]]:
        """Interleaved rounds of ``workloads`` with the run's rounds and warm-up."""
        self.log(f"timing {len(workloads)} workloads x {self.settings.rounds} rounds: " + ", ".join(workloads))
        return interleaved_times(
            workloads, self.device, self.settings.rounds, iters, self.settings.warmup, self.settings.clock
        )
