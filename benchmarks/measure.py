"""Timing by interleaved rounds, and peak allocator memory, on CPU or CUDA.

Timing: every round runs each workload in turn (in an order rotated from round to round), so
drift of the machine (other processes, frequency, caches) hits all workloads alike; a ratio is
the median over rounds of the per-round ratio of the two workloads' times. The clock is wall
time, or the process's CPU time (``--clock cpu``, CPU device): on a machine shared with other
jobs that is the work done, not how long the scheduler kept the process waiting; with one
intra-op thread it counts exactly the benchmark's computation (with more, also the spinning
of idle OpenMP threads).

Memory: the peak number of bytes held by torch's allocator while a workload runs, above what
was held before it (a second run, measured after a first one in the same measurement, so that
it sees the steady state between runs). On CUDA this is ``torch.cuda.max_memory_allocated``;
on CPU, whose allocator keeps no peak statistic (and whose RSS is blurred by malloc's caching
and by the profiler's own memory), it is the maximum running sum of the allocation (+) and
free (−) events that ``torch.profiler`` records with ``profile_memory=True``, in time order,
where a free counts only if its block was allocated inside the measurement.
"""

from __future__ import annotations

import contextlib
import statistics
import time
from typing import Callable, ContextManager, Dict, Iterable, List, Mapping, Tuple

import torch
from torch import nn
from torch._C._profiler import _EventType
from torch.profiler import ProfilerActivity, profile

from benchmarks.table import Row


class Workload:
    """Something to time: ``run`` is timed, ``prepare`` (before each run) is not."""

    def prepare(self) -> None:
        pass

    def run(self) -> None:
        raise NotImplementedError


class OptimizerStep(Workload):
    """A training step: zero_grad; ``loss()`` under ``context.autocast()``; backward; optimizer step."""

    def __init__(self, model: nn.Module, context, optimizer: torch.optim.Optimizer) -> None:
        self.model, self.context, self.optimizer = model, context, optimizer

    def prepare(self) -> None:
        self.model.train()

    def loss(self) -> torch.Tensor:
        raise NotImplementedError

    def run(self) -> None:
        self.optimizer.zero_grad(set_to_none=True)
        with self.context.autocast():
            loss = self.loss()
        loss.backward()
        self.optimizer.step()


class CallWorkload(Workload):
    def __init__(self, fn: Callable[[], None]) -> None:
        self.fn = fn

    def run(self) -> None:
        self.fn()


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


CLOCKS: Dict[str, Callable[[], float]] = {
    "wall": time.perf_counter,
    "cpu": time.process_time,
}


def seconds_of_one_run(workload: Workload, device: torch.device, clock: str = "wall") -> float:
    """Seconds of one run on ``clock`` (device work included); ``prepare`` is not timed."""
    now = CLOCKS[clock]
    workload.prepare()
    synchronize(device)
    start = now()
    workload.run()
    synchronize(device)
    return now() - start


def interleaved_times(
    workloads: Mapping[str, Workload],
    device: torch.device,
    rounds: int,
    iters: int,
    warmup: int,
    clock: str = "wall",
) -> Dict[str, List[float]]:
    """Seconds per run of each workload in each round.

    A round runs every workload once, ``iters`` times over, in an order rotated from round to
    round; a workload's time in the round is the median of its ``iters`` runs, which rejects
    runs that another process on a shared machine happened to interrupt.
    """
    names = list(workloads)
    for name in names:
        for _ in range(warmup):
            workloads[name].prepare()
            workloads[name].run()
    times: Dict[str, List[float]] = {name: [] for name in names}
    for r in range(rounds):
        shift = r % len(names)
        order = names[shift:] + names[:shift]
        runs: Dict[str, List[float]] = {name: [] for name in names}
        for _ in range(iters):
            for name in order:
                runs[name].append(seconds_of_one_run(workloads[name], device, clock))
        for name in names:
            times[name].append(statistics.median(runs[name]))
    return times


def round_ratios(numerator: Iterable[float], denominator: Iterable[float]) -> List[float]:
    """numerator[r] / denominator[r] for every round r."""
    return [a / b for a, b in zip(numerator, denominator)]


def median_ratio(numerator: Iterable[float], denominator: Iterable[float]) -> float:
    """Median over rounds of numerator[r] / denominator[r]."""
    return statistics.median(round_ratios(numerator, denominator))


def spread(numerator: Iterable[float], denominator: Iterable[float]) -> str:
    """The range of the per-round ratios, e.g. 'rounds 0.93-1.02'."""
    ratios = round_ratios(numerator, denominator)
    return f"rounds {min(ratios):.2f}-{max(ratios):.2f}"


def ratio_row(
    section: str, label: str, base: str, metric: str, times: Mapping[str, List[float]], target, note: str = ""
) -> Row:
    """The row "``label`` / ``base``": the median per-round ratio of ``base``'s time to ``label``'s
    (above 1: ``label`` is faster), ``note`` and the rounds' spread as its detail."""
    detail = spread(times[base], times[label])
    return Row(
        section,
        f"{label} / {base}",
        metric,
        median_ratio(times[base], times[label]),
        target,
        f"{note}; {detail}" if note else detail,
    )


def held_bytes(tensors: Iterable[torch.Tensor]) -> int:
    """Bytes of distinct tensor storages (parameters, optimizer state)."""
    seen = set()
    total = 0
    for t in tensors:
        storage = t.untyped_storage()
        if storage.data_ptr() in seen:
            continue
        seen.add(storage.data_ptr())
        total += storage.nbytes()
    return total


def model_and_optimizer_bytes(model: nn.Module, optimizer: torch.optim.Optimizer) -> int:
    """Parameters and optimizer state: what stays allocated between training steps."""
    state = [v for s in optimizer.state.values() for v in s.values() if torch.is_tensor(v)]
    return held_bytes(list(model.parameters()) + state)


MARKER_BYTES = 7_340_033  # an allocation size no workload makes (a prime number of bytes)


def peak_extra_bytes(fn: Callable[[], None], device: torch.device) -> int:
    """Peak bytes allocated during the second of two back-to-back runs of ``fn``, counted from
    before the first (see module docstring).

    The first run, inside the same measurement, frees what the previous run left behind and
    leaves what one run leaves to the next, so the second run sees its steady state and every
    block it frees was allocated (and sized) inside the measurement.
    """
    if device.type == "cuda":
        synchronize(device)
        start = torch.cuda.memory_allocated(device)
        fn()
        synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        fn()
        synchronize(device)
        return torch.cuda.max_memory_allocated(device) - start
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
        marker = torch.empty(MARKER_BYTES, dtype=torch.uint8)  # its event splits the runs
        del marker
        fn()
    return _second_run_peak(_allocation_events(prof))


def _allocation_events(prof: profile) -> List[Tuple[int, int, int]]:
    """(time, address, ±bytes) of the CPU allocations and frees the profiler recorded."""
    events = []
    stack = list(prof.profiler.kineto_results.experimental_event_tree())
    while stack:
        node = stack.pop()
        stack.extend(node.children)
        if node.tag == _EventType.Allocation and node.extra_fields.device.type == "cpu":
            fields = node.extra_fields
            events.append((node.start_time_ns, fields.ptr, fields.alloc_size))
    return sorted(events)


def _second_run_peak(events: List[Tuple[int, int, int]]) -> int:
    """Largest running sum of the bytes allocated inside the measurement, during the run after
    the marker. A free counts only if its block was allocated inside the measurement: the
    profiler remembers sizes across measurements, so a block from an earlier one would
    otherwise lower the baseline."""
    live: Dict[int, int] = {}
    held = 0
    peak = 0
    second_run = False
    for _, address, nbytes in events:
        if nbytes > 0:
            live[address] = nbytes
            held += nbytes
        elif address in live:
            held -= live.pop(address)
        if abs(nbytes) == MARKER_BYTES:
            second_run = True
        elif second_run:
            peak = max(peak, held)
    return peak


def autocast(device: torch.device, dtype: str) -> ContextManager:
    """bf16 autocast (fp32 master weights) when asked; otherwise no change."""
    if dtype == "bfloat16":
        return torch.autocast(device_type=device.type, dtype=torch.bfloat16)
    return contextlib.nullcontext()
