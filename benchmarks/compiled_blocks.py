"""torch.compile of the Runge–Kutta blocks: an RK4 encoder whose blocks' ``forward`` (all stages,
the stage sums and the output combination) is compiled, against the same encoder run eagerly.

Same weights (a deep copy), same batch; fwd+bwd of mean(h²) and an eval-mode forward. Compilation
happens in the warm-up runs, so the ratios are steady-state speed. Opt-in (``--sections compile``):
it needs a C/C++ compiler on CPU and takes a while to compile.
"""

from __future__ import annotations

import copy
from typing import List

from benchmarks.context import RunContext
from benchmarks.data import synthetic_batch
from benchmarks.measure import median_ratio, spread
from benchmarks.models import ode
from benchmarks.rk_overhead import EncoderPass
from benchmarks.table import Row


def run_compiled_blocks(context: RunContext) -> List[Row]:
    s = context.settings
    batch = synthetic_batch(context.dictionary, s.batch_sentences, s.source_len, s.seed)
    batch = batch.to(context.device)
    eager_label = f"rk4 encoder {s.rk_blocks} blocks"
    compiled_label = f"{eager_label}, torch.compile"
    eager = context.build(ode(eager_label, s.rk_blocks, 1, "rk4")).encoder
    compiled = copy.deepcopy(eager)
    for block in compiled.layers:
        block.compile(dynamic=False)
    rows: List[Row] = []
    for backward, metric in ((True, "source tokens/s (fwd+bwd)"), (False, "source tokens/s (eval forward)")):
        workloads = {
            label: EncoderPass(encoder, batch, context, backward)
            for label, encoder in ((eager_label, eager), (compiled_label, compiled))
        }
        times = context.time(workloads, s.train_iters)
        rows.append(
            Row(
                "compile",
                f"{compiled_label} / eager",
                metric,
                median_ratio(times[eager_label], times[compiled_label]),
                None,
                spread(times[eager_label], times[compiled_label]),
            )
        )
    return rows
