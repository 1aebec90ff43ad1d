"""``python -m benchmarks.run``: every comparison in one process, printed as a table of ratios.

Sections (``--sections``): training (throughput and peak memory of L-L models, per-stage
checkpointing), rk-overhead (RK-n encoder of L blocks vs n·L layers), generation (beam search
sentences/s), decoder-step (one incremental step of one layer, at two prefix lengths), and the
opt-in compile (torch.compile'd RK4 blocks vs eager), lm-training and lm-generation (language
models against transformer_lm at the same layer evaluations, :mod:`benchmarks.language_models`),
hf-training and hf-decoding (ode_seq.transformers' ODE Llama against transformers' Llama at the same
layer evaluations, :mod:`benchmarks.transformers_speed`).
Progress goes to stderr; the table and notes to stdout; ``--json FILE`` also saves the rows, after
every section.
"""

from __future__ import annotations

import json
import os
import platform
import sys
from dataclasses import asdict
from typing import Callable, Dict, List, Optional, Sequence

import torch

from benchmarks.compiled_blocks import run_compiled_blocks
from benchmarks.context import RunContext
from benchmarks.data import build_dictionary
from benchmarks.decoder_step import run_decoder_step
from benchmarks.generation import run_generation
from benchmarks.language_models import run_lm_generation, run_lm_training
from benchmarks.rk_overhead import run_rk_overhead
from benchmarks.settings import Settings, parse_settings
from benchmarks.table import Row, markdown
from benchmarks.training import run_training
from benchmarks.transformers_speed import run_hf_decoding, run_hf_training

SECTION_RUNNERS: Dict[str, Callable[[RunContext], List[Row]]] = {
    "training": run_training,
    "rk-overhead": run_rk_overhead,
    "generation": run_generation,
    "decoder-step": run_decoder_step,
    "compile": run_compiled_blocks,
    "lm-training": run_lm_training,
    "lm-generation": run_lm_generation,
    "hf-training": run_hf_training,
    "hf-decoding": run_hf_decoding,
}


def environment(settings: Settings) -> str:
    device = settings.device
    if device == "cuda":
        device = f"cuda ({torch.cuda.get_device_name()})"
    return (
        f"torch {torch.__version__}, {device}, {settings.dtype}, {settings.clock} clock, "
        f"{settings.threads} intra-op threads, {os.cpu_count()} CPUs visible, "
        f"{platform.machine()}, load average {os.getloadavg()[0]:.1f}"
    )


def run(settings: Settings, after_section: Callable[[RunContext], None] = lambda context: None) -> RunContext:
    """Run the selected sections, calling ``after_section`` after each; the context holds the
    notes, ``rows`` the results."""
    torch.set_num_threads(settings.threads)
    dictionary, origin = build_dictionary(settings)
    context = RunContext(settings, dictionary)
    context.notes.append(f"dictionary: {origin}")
    for section in settings.sections:
        context.log(f"section {section}")
        context.rows.extend(SECTION_RUNNERS[section](context))
        after_section(context)
    context.log("done")
    return context


def write_json(path: str, settings: Settings, started_in: str, context: RunContext) -> None:
    """The rows so far as JSON, replacing ``path`` whole (a run cut short keeps its sections)."""
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        json.dump(
            {
                "settings": asdict(settings),
                "environment": [started_in, environment(settings)],
                "notes": context.notes,
                "rows": [r.as_dict() for r in context.rows],
            },
            f,
            indent=2,
        )
    os.replace(path + ".tmp", path)


def main(argv: Optional[Sequence[str]] = None) -> int:
    settings, args = parse_settings(argv)
    started_in = environment(settings)
    if args.json:
        context = run(settings, lambda context: write_json(args.json, settings, started_in, context))
    else:
        context = run(settings)
    s = settings
    print(
        f"# ode-seq benchmark: d={s.embed_dim}, FFN {s.ffn_dim}, {s.heads} heads, "
        f"{s.layers}-{s.layers} layers, RK-overhead {s.rk_blocks} blocks"
    )
    print(f"# at start: {started_in}")
    print(f"# at end:   {environment(settings)}")
    print(markdown(context.rows))
    for note in context.notes:
        print(f"- {note}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
