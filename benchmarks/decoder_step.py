"""One incremental decoding step of one decoder layer: RK-n block against fairseq's layer.

Each layer first decodes a prefix (random inputs) into its incremental state; every timed run
then decodes one more position from a structural copy of that state (the copy is untimed; the
cached tensors are shared, since attention replaces rather than mutates them). An RK-n block
evaluates its layer n times, so n is its floor; a block that recomputed the prefix would also
get slower with the prefix much faster than the vanilla layer does.
"""

from __future__ import annotations

from statistics import median
from typing import Any, Dict, List

import torch
from torch import Tensor, nn

from benchmarks.context import RunContext
from benchmarks.measure import Workload, median_ratio, round_ratios, spread
from benchmarks.models import ode, transformer
from benchmarks.table import Row

METHODS = ((1, "euler"), (2, "heun"), (4, "rk4"))
VANILLA = "transformer layer"


def copy_state(state: Dict[str, Any]) -> Dict[str, Any]:
    """The nested dictionaries of an incremental state copied, their tensors shared."""
    return {k: copy_state(v) if isinstance(v, dict) else v for k, v in state.items()}


class DecoderLayerStep(Workload):
    """Decode position ``prefix`` + 1 with one layer, ``rows`` hypotheses at once."""

    def __init__(
        self, layer: nn.Module, prefix: int, encoder_out: Tensor, encoder_padding_mask: Tensor, context: RunContext
    ) -> None:
        self.layer = layer
        self.encoder_out = encoder_out
        self.encoder_padding_mask = encoder_padding_mask
        self.context = context
        rows, dim = encoder_out.size(1), encoder_out.size(2)
        g = torch.Generator().manual_seed(context.settings.seed + prefix)
        inputs = torch.randn(prefix + 1, 1, rows, dim, generator=g).to(context.device)
        self.prefilled: Dict[str, Any] = {}
        layer.eval()
        for x in inputs[:-1]:
            self._step(x, self.prefilled)
        self.x = inputs[-1]
        self.state = copy_state(self.prefilled)

    def _step(self, x: Tensor, state: Dict[str, Any]) -> None:
        with torch.no_grad(), self.context.autocast():
            self.layer(
                x, encoder_out=self.encoder_out, encoder_padding_mask=self.encoder_padding_mask, incremental_state=state
            )

    def prepare(self) -> None:
        self.layer.eval()
        self.state = copy_state(self.prefilled)

    def run(self) -> None:
        self._step(self.x, self.state)


def _encoder_output(context: RunContext, rows: int):
    """Random encoder states (S, rows, d) and a left-padding mask (row r pads r mod 4)."""
    s = context.settings
    g = torch.Generator().manual_seed(s.seed)
    out = torch.randn(s.source_len, rows, s.embed_dim, generator=g)
    positions = torch.arange(s.source_len).unsqueeze(0)
    pads = (torch.arange(rows) % 4).clamp(max=s.source_len - 1).unsqueeze(1)
    return out.to(context.device), (positions < pads).to(context.device)


def run_decoder_step(context: RunContext) -> List[Row]:
    s = context.settings
    rows = s.step_sentences * s.beam
    encoder_out, mask = _encoder_output(context, rows)
    layers = {VANILLA: context.build(transformer(VANILLA, 1, 1)).decoder.layers[0]}
    for n, method in METHODS:
        label = f"{method} block"
        layers[label] = context.build(ode(label, 1, 1, decoder_method=method)).decoder.layers[0]
    short, long = s.step_prefixes
    context.notes.append(
        f"decoder step: {rows} hypotheses ({s.step_sentences} sentences x beam {s.beam}), "
        f"{s.source_len} source positions, prefixes {short} and {long}, "
        f"{s.step_iters} steps per round"
    )
    steps = {
        (label, prefix): DecoderLayerStep(layer, prefix, encoder_out, mask, context)
        for prefix in (short, long)
        for label, layer in layers.items()
    }
    times = context.time({f"{label} @{p}": w for (label, p), w in steps.items()}, s.step_iters)

    def t(label: str, prefix: int) -> List[float]:
        return times[f"{label} @{prefix}"]

    result: List[Row] = []
    for n, method in METHODS:
        label = f"{method} block"
        comparison = f"{label} (n={n}) / {VANILLA}"
        for prefix in (short, long):
            rk, vanilla = t(label, prefix), t(VANILLA, prefix)
            result.append(
                Row(
                    "decoder-step",
                    comparison,
                    f"seconds per step @prefix {prefix}",
                    median_ratio(rk, vanilla),
                    ("<=", round(1.1 * n, 2)),
                    f"{1e6 * median(rk):.0f} vs {1e6 * median(vanilla):.0f} us; {spread(rk, vanilla)}",
                )
            )
        rk_growth = round_ratios(t(label, long), t(label, short))
        vanilla_growth = round_ratios(t(VANILLA, long), t(VANILLA, short))
        result.append(
            Row(
                "decoder-step",
                comparison,
                f"step-time growth @{long} vs @{short}",
                median_ratio(rk_growth, vanilla_growth),
                ("<=", 1.1),
                f"x{median(rk_growth):.2f} vs x{median(vanilla_growth):.2f}; {spread(rk_growth, vanilla_growth)}",
            )
        )
    return result
