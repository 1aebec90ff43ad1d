"""Trajectory statistics of Runge–Kutta blocks, recorded by observing their solves.

Block l solves over [t_l, t_l + T_l] (t_l: the end of the previous block). The observer sees
every evaluation: the stage input z = y_n + h Σ_{j<i} a_ij k_j at depth t_l + (n + c_i) h, the
stage output k_i = F(z), and the block's input and output. For a fixed grid the block's combiner
gives the output weights w of every step (per token for learned gates, one vector for fixed or
free weights); the effective step size is h_eff = h Σ_i w̄_i (w̄: mean over tokens and steps),
which is h for gates and fixed weights (Σ b = 1) and learned for free weights. Adaptive blocks
report their method, evaluations per step and NFE; their stage depths are the times at which
the solver evaluated. Norms are per-token L2 norms over non-padding positions.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any, Dict, Iterator, List, Optional

import numpy as np
import torch
from torch import Tensor, nn

from ode_seq.layers.blocks import ode_blocks
from ode_seq.model_inputs import batch_pass, model_stacks
from ode_seq.solvers import AdaptiveSolver, EMAWeights, FixedWeights, FreeWeights, SolveObserver, StageGate

GATE_BINS = np.linspace(0.0, 1.0, 21)


def coefficient_kind(block: nn.Module) -> str:
    """'gate' (per-token learned weights), 'free' (learned scalars), 'ema' (PCformer's learned
    β), 'fixed' (tableau b) or 'adaptive' (an embedded pair's own weights)."""
    if isinstance(block.solver, AdaptiveSolver):
        return "adaptive"
    kinds = {StageGate: "gate", FreeWeights: "free", EMAWeights: "ema", FixedWeights: "fixed"}
    return kinds[type(block.combiner)]


@dataclass
class BlockTrajectory:
    """What one block did on one batch: per-token norms over non-pad tokens, per evaluation in
    order, and the output weights, (steps·tokens, s) for a gate or (s,) for fixed and free
    weights (empty for an adaptive solve)."""

    index: int
    method: str
    coefficients: str
    steps: Optional[int]
    stages: int
    step_size: Optional[float]
    end_time: float
    stage_times: List[float]
    stage_indices: List[int]
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
            "steps": self.steps,
            "stages": self.stages,
            "nfe": len(self.stage_times),
            "step_size": self.step_size,
            "end_time": self.end_time,
            "stage_times": self.stage_times,
            "stage_indices": self.stage_indices,
            "tableau_b": self.tableau_b,
            "state_in_norm": _moments(self.state_in),
            "state_out_norm": _moments(self.state_out),
            "relative_update_norm": _moments(self.update_ratio),
            "stage_input_norm": [_moments(v) for v in self.stage_inputs],
            "stage_output_norm": [_moments(v) for v in self.stage_outputs],
            "mean_weights": [float(w) for w in mean_weights],
            "effective_step_size": (None if self.step_size is None else self.step_size * float(mean_weights.sum())),
        }
        if self.weights.ndim == 2:
            stats["gate"] = {
                "bin_edges": GATE_BINS.tolist(),
                "histograms": [np.histogram(w, GATE_BINS)[0].tolist() for w in self.weights.T],
                "quantiles_5_50_95": [np.quantile(w, [0.05, 0.5, 0.95]).tolist() for w in self.weights.T],
            }
        return stats


def _moments(values: np.ndarray) -> Dict[str, float]:
    return {"mean": float(values.mean()), "std": float(values.std())}


def _per_token(x: Tensor, keep: Tensor) -> np.ndarray:
    """x (T, B[, C]) → values at non-pad positions (a feature axis C is reduced to its norm)."""
    values = x.float().norm(dim=-1) if x.dim() == 3 else x.float()
    return values[keep].detach().cpu().numpy()


class _BlockObserver(SolveObserver):
    """Collects one solve of block ``index`` and appends its :class:`BlockTrajectory`."""

    def __init__(self, recorder: "TrajectoryRecorder", index: int, block: nn.Module) -> None:
        self.recorder, self.index, self.block = recorder, index, block

    def solve_started(self, solver: Any, y: Tensor) -> None:
        self.solver, self.y_in, self.start = solver, y, self.recorder.clock
        self.evaluations: List[tuple] = []

    def stage_evaluated(self, step: int, stage: int, t: float, z: Tensor, k: Tensor) -> None:
        self.evaluations.append((step, stage, self.start + t, z, k))

    def _weights(self, keep: Tensor) -> np.ndarray:
        """Per step the combiner's w: stacked over steps for gates, one vector otherwise."""
        if isinstance(self.solver, AdaptiveSolver):
            return np.zeros(0)
        combiner, stages = self.block.combiner, self.solver.tableau.stages
        ks = [k for _, _, _, _, k in self.evaluations]
        every = self.solver.evaluations_per_step  # a corrector's evaluation follows a step's stages
        per_step = [combiner.weights(ks[i : i + stages]) for i in range(0, len(ks), every)]
        if per_step[0].dim() == 3:
            return torch.cat([w[keep] for w in per_step]).detach().cpu().float().numpy()
        return per_step[0].detach().cpu().float().numpy()

    def solve_finished(self, y: Tensor) -> None:
        keep, solver = self.recorder.keep, self.solver
        if keep is None:
            raise RuntimeError("TrajectoryRecorder.keep must be set before the forward pass")
        adaptive = isinstance(solver, AdaptiveSolver)
        update = (y - self.y_in).float().norm(dim=-1)
        self.recorder.records.append(
            BlockTrajectory(
                index=self.index,
                method=solver.method,
                coefficients=coefficient_kind(self.block),
                steps=None if adaptive else solver.steps,
                stages=solver.scheme.evaluations_per_step if adaptive else solver.evaluations_per_step,
                step_size=None if adaptive else solver.step_size,
                end_time=self.start + solver.interval,
                stage_times=[t for _, _, t, _, _ in self.evaluations],
                stage_indices=[stage for _, stage, _, _, _ in self.evaluations],
                tableau_b=[] if adaptive else list(solver.tableau.b),
                state_in=_per_token(self.y_in, keep),
                state_out=_per_token(y, keep),
                update_ratio=_per_token(update / self.y_in.float().norm(dim=-1), keep),
                stage_inputs=[_per_token(z, keep) for _, _, _, z, _ in self.evaluations],
                stage_outputs=[_per_token(k, keep) for _, _, _, _, k in self.evaluations],
                weights=self._weights(keep),
            )
        )
        self.recorder.clock += solver.interval


class TrajectoryRecorder:
    """Records :class:`BlockTrajectory` for every block of one stack while the model runs.

    ``keep`` must be set to the (T, B) mask of non-pad positions of the stack's input before
    each forward pass.
    """

    def __init__(self, stack: nn.Module) -> None:
        self.blocks = ode_blocks(stack)
        self.keep: Optional[Tensor] = None
        self.records: List[BlockTrajectory] = []
        self.clock = 0.0

    @contextlib.contextmanager
    def recording(self) -> Iterator["TrajectoryRecorder"]:
        handles = [b.register_observer(_BlockObserver(self, i, b)) for i, b in enumerate(self.blocks)]
        try:
            yield self
        finally:
            for handle in handles:
                handle.remove()


def record_trajectories(model: nn.Module, net_input: Dict[str, Tensor], pad: int) -> Dict[str, List[BlockTrajectory]]:
    """Run the model once (no grad) on fairseq's ``net_input`` and return the records of the
    blocks of each of its stacks (encoder and decoder; a language model's decoder)."""
    model_pass = batch_pass(model, net_input)
    keep = model_pass.keep(pad)
    recorders = {stack: TrajectoryRecorder(getattr(model, stack)) for stack in model_stacks(model)}
    with contextlib.ExitStack() as recording, torch.no_grad():
        for stack, recorder in recorders.items():
            recorder.keep = keep[stack]
            recording.enter_context(recorder.recording())
        model(*model_pass.args)
    return {stack: recorder.records for stack, recorder in recorders.items()}
