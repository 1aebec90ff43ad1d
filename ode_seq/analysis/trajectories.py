"""Trajectory statistics of Runge–Kutta blocks, recorded without changing the model.

For block l with input y_l (time t = l, step h = 1) the recorder sees every stage input
z_i = y_l + Σ_{j<i} a_ij k_j (time l + c_i), every stage output k_i = F(z_i) and the output
y_{l+1} = y_l + Σ_i w_i k_i. It wraps the instance's ``field`` (the block's forward looks it up
on the instance) and uses forward hooks; the combiner gives the output weights w, per token for
learned gates, one vector for fixed or free weights. The effective step size of a block is
h_eff = Σ_i w_i (w = h·b for a tableau with Σ b = 1): 1 for gates and fixed weights, learned
for free weights. Norms are per-token L2 norms over non-padding positions.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Dict, Iterator, List, Optional

import numpy as np
import torch
from torch import Tensor, nn

from ..blocks import DecoderODEBlock, EncoderODEBlock
from ..coefficients import FixedWeights, FreeWeights, StageGate

GATE_BINS = np.linspace(0.0, 1.0, 21)


def ode_blocks(stack: nn.Module) -> List[nn.Module]:
    """The Runge–Kutta blocks of an encoder or decoder, in order (wrappers looked through)."""
    return [m for m in stack.modules() if isinstance(m, (EncoderODEBlock, DecoderODEBlock))]


def coefficient_kind(block: nn.Module) -> str:
    """'gate' (per-token learned weights), 'free' (learned scalars) or 'fixed' (tableau b)."""
    if isinstance(block.combiner, StageGate):
        return "gate"
    if isinstance(block.combiner, FreeWeights):
        return "free"
    if isinstance(block.combiner, FixedWeights):
        return "fixed"
    raise TypeError(f"unknown Runge-Kutta combiner {type(block.combiner).__name__}")


@dataclass
class BlockTrajectory:
    """What one block did on one batch: per-token norms over non-pad tokens and the output
    weights, (tokens, s) for a gate or (s,) for fixed and free weights."""

    index: int
    method: str
    coefficients: str
    stage_times: List[float]
    tableau_b: List[float]
    state_in: np.ndarray
    state_out: np.ndarray
    update_ratio: np.ndarray
    stage_inputs: List[np.ndarray]
    stage_outputs: List[np.ndarray]
    weights: np.ndarray

    def statistics(self) -> Dict[str, object]:
        """JSON-ready summary; gate blocks add per-stage weight histograms on [0, 1]."""
        mean_weights = self.weights.mean(axis=0) if self.weights.ndim == 2 else self.weights
        stats: Dict[str, object] = {
            "block": self.index,
            "method": self.method,
            "coefficients": self.coefficients,
            "stage_times": self.stage_times,
            "tableau_b": self.tableau_b,
            "state_in_norm": _moments(self.state_in),
            "state_out_norm": _moments(self.state_out),
            "relative_update_norm": _moments(self.update_ratio),
            "stage_input_norm": [_moments(v) for v in self.stage_inputs],
            "stage_output_norm": [_moments(v) for v in self.stage_outputs],
            "mean_weights": [float(w) for w in mean_weights],
            "effective_step_size": float(mean_weights.sum()),
        }
        if self.weights.ndim == 2:
            stats["gate"] = {
                "bin_edges": GATE_BINS.tolist(),
                "histograms": [np.histogram(w, GATE_BINS)[0].tolist() for w in self.weights.T],
                "quantiles_5_50_95": [
                    np.quantile(w, [0.05, 0.5, 0.95]).tolist() for w in self.weights.T
                ],
            }
        return stats


def _moments(values: np.ndarray) -> Dict[str, float]:
    return {"mean": float(values.mean()), "std": float(values.std())}


def _per_token(x: Tensor, keep: Tensor) -> np.ndarray:
    """x (T, B[, C]) → values at non-pad positions (a feature axis C is reduced to its norm)."""
    values = x.float().norm(dim=-1) if x.dim() == 3 else x.float()
    return values[keep].detach().cpu().numpy()


class TrajectoryRecorder:
    """Records :class:`BlockTrajectory` for every block of one stack while the model runs.

    ``keep`` must be set to the (T, B) mask of non-pad positions of the stack's input before
    each forward pass.
    """

    def __init__(self, stack: nn.Module) -> None:
        self.blocks = ode_blocks(stack)
        self.keep: Optional[Tensor] = None
        self.records: List[BlockTrajectory] = []
        self._stages: List[tuple] = []

    @contextlib.contextmanager
    def recording(self) -> Iterator["TrajectoryRecorder"]:
        handles = []
        try:
            for i, block in enumerate(self.blocks):
                block.field = self._recording_field(block.field)
                handles.append(block.register_forward_pre_hook(self._start_block))
                handles.append(block.register_forward_hook(self._block_hook(i)))
            yield self
        finally:
            for handle in handles:
                handle.remove()
            for block in self.blocks:
                block.__dict__.pop("field", None)

    def _recording_field(self, field_fn):
        def recording_field(z: Tensor, *args, **kwargs):
            out = field_fn(z, *args, **kwargs)
            self._stages.append((z, out[0] if isinstance(out, tuple) else out))
            return out

        return recording_field

    def _start_block(self, module: nn.Module, args) -> None:
        self._stages = []

    def _block_hook(self, index: int):
        def hook(block: nn.Module, args, output) -> None:
            if self.keep is None:
                raise RuntimeError("TrajectoryRecorder.keep must be set before the forward pass")
            y_in = args[0]
            y_out = output[0] if isinstance(output, tuple) else output
            ks = [k for _, k in self._stages]
            weights = block.combiner.weights(ks)
            tableau = block.tableau
            update = (y_out - y_in).float().norm(dim=-1)
            self.records.append(BlockTrajectory(
                index=index,
                method=tableau.name,
                coefficients=coefficient_kind(block),
                stage_times=[index + c for c in tableau.c],
                tableau_b=list(tableau.b),
                state_in=_per_token(y_in, self.keep),
                state_out=_per_token(y_out, self.keep),
                update_ratio=_per_token(update / y_in.float().norm(dim=-1), self.keep),
                stage_inputs=[_per_token(z, self.keep) for z, _ in self._stages],
                stage_outputs=[_per_token(k, self.keep) for k in ks],
                weights=(
                    weights[self.keep].detach().cpu().float().numpy()
                    if weights.dim() == 3 else weights.detach().cpu().float().numpy()
                ),
            ))
            self._stages = []

        return hook


def record_trajectories(
    model: nn.Module, net_input: Dict[str, Tensor], pad: int
) -> Dict[str, List[BlockTrajectory]]:
    """Run the model once (no grad) and return the records of its encoder and decoder blocks."""
    encoder, decoder = TrajectoryRecorder(model.encoder), TrajectoryRecorder(model.decoder)
    encoder.keep = net_input["src_tokens"].ne(pad).T
    decoder.keep = net_input["prev_output_tokens"].ne(pad).T
    with encoder.recording(), decoder.recording(), torch.no_grad():
        model(**net_input)
    return {"encoder": encoder.records, "decoder": decoder.records}
