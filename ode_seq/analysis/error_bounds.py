"""The global error of forward Euler along a model's trajectories (ODE-ViT's error bound).

For dy/dt = f(t, y) on [0, T], f L-Lipschitz in y, Euler with N steps of size h = T/N has

    ‖y(T) − y_N‖ ≤ (e^{LT} − 1) / (2L) · h · sup_t ‖y''(t)‖,

which at T = 1 is ODE-ViT's (e^L − 1)/(2LN)·sup‖x''‖. For each Euler block and each sentence
(its state is the (tokens × d) matrix of its non-padding positions, Frobenius norm) the terms
are estimated from the solve itself, with k_n = f(t_n, y_n) the stage value of step n:

- sup‖y''‖ from the second differences of the states, (y_{n+1} − 2y_n + y_{n−1})/h² =
  (k_n − k_{n−1})/h, maximised over n = 1 … N−1;
- L along the trajectory: max_n ‖k_n − k_{n−1}‖ / ‖y_n − y_{n−1}‖ (the field's local
  Lipschitz quotient between consecutive states: a lower estimate of its Lipschitz constant);
- L from weight norms, for fields whose normalisation is globally Lipschitz (CenterNorm; a
  LayerNorm divides by the standard deviation and has no global constant): sublayer m has
  L_m = Lip(norm)·‖W_V‖₂‖W_O‖₂ (attention) or Lip(norm)·‖W_1‖₂·max|σ'|·‖W_2‖₂ (FFN), with
  the attention probabilities held fixed and no token mixing (softmax's own derivative is left
  out: dot-product attention has no global Lipschitz constant), so cross-attention adds 0. The
  sublayers combine as Σ_m L_m (parallel field), Σ_m L_m Π_{m'<m}(1 + s L_{m'}) (residual
  branch, inner stream advanced by s) or Π_m(1 + L_m) (whole layer).

The bound is compared with the error it bounds: the block is solved again from the same input
with ``refine`` times as many Euler steps, and ‖y_N − y_ref‖ is the measured global error (also
relative to ‖y_ref‖; a
time-dependent residual-branch block keeps its inner-stream step s, so both solves integrate
the same field).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Dict, List, Optional, Sequence

import torch
from torch import Tensor, nn

from ode_seq.layers.blocks import ODEBlock
from ode_seq.layers.stable.center_norm import CenterNorm
from ode_seq.solvers import FixedGridSolver, SolveObserver

from .token_sensitivity import BlockCall

REFINE = 16
ACTIVATION_GRID = torch.linspace(-10.0, 10.0, 20001)


def euler_error_bound(lipschitz: float, interval: float, step_size: float, second_derivative: float) -> float:
    """(e^{LT} − 1)/(2L) · h · M (h·T·M/2 in the limit L → 0; inf when e^{LT} overflows)."""
    if lipschitz * interval > 700:
        return math.inf
    growth = interval if lipschitz == 0 else math.expm1(lipschitz * interval) / lipschitz
    return growth / 2 * step_size * second_derivative


def trajectory_estimates(
    states: Sequence[Tensor], slopes: Sequence[Tensor], step_size: float, keep: Tensor
) -> Dict[str, Tensor]:
    """Per sentence (B,): sup‖y''‖ and the Lipschitz quotient from Euler states y_0 … y_{N−1}
    and their slopes k_n = f(y_n), each (T, B, d); ``keep`` (T, B) marks non-padding tokens."""
    mask = keep.unsqueeze(-1).to(states[0].dtype)

    def norms(x: Tensor) -> Tensor:
        return (x * mask).pow(2).sum(dim=(0, 2)).sqrt()

    slope_changes = torch.stack([norms(b - a) for a, b in zip(slopes[:-1], slopes[1:])])
    state_changes = torch.stack([norms(b - a) for a, b in zip(states[:-1], states[1:])])
    return {
        "second_derivative": slope_changes.max(dim=0).values / step_size,
        "lipschitz": (slope_changes / state_changes.clamp_min(1e-30)).max(dim=0).values,
    }


def activation_lipschitz(activation: Any) -> float:
    """max |σ'(u)| over u ∈ [−10, 10] (1 for ReLU, 1.13 for GELU)."""
    u = ACTIVATION_GRID.clone().requires_grad_()
    (gradient,) = torch.autograd.grad(activation(u).sum(), u)
    return float(gradient.abs().max())


def _norm_lipschitz(norm: nn.Module) -> float:
    """Lip(CN) = (D/(D−1))·max|γ| (the centring projection has norm 1)."""
    return norm.scale * float(norm.weight.detach().abs().max())


def _spectral(linear: nn.Linear) -> float:
    return float(torch.linalg.matrix_norm(linear.weight.detach().float(), ord=2))


def weight_lipschitz(block: ODEBlock) -> Optional[float]:
    """L from weight norms (module docstring), or None when a norm is not a CenterNorm."""
    norms = [block.self_attn_layer_norm, block.final_layer_norm]
    if not all(isinstance(n, CenterNorm) for n in norms):
        return None
    attention = (
        _norm_lipschitz(block.self_attn_layer_norm)
        * _spectral(block.self_attn.v_proj)
        * _spectral(block.self_attn.out_proj)
    )
    ffn = (
        _norm_lipschitz(block.final_layer_norm)
        * _spectral(block.fc1)
        * activation_lipschitz(block.activation_fn)
        * _spectral(block.fc2)
    )
    sublayers = [attention] + ([0.0] if getattr(block, "encoder_attn", None) is not None else []) + [ffn]
    if block.field_form == "parallel-branch":
        return sum(sublayers)
    if block.field_form == "whole-layer":
        return math.prod(1 + lip for lip in sublayers)
    total, stream = 0.0, 1.0
    for lip in sublayers:
        total += lip * stream
        stream *= 1 + block.stream_scale * lip
    return total


class _EulerSteps(SolveObserver):
    """y_n and k_n = f(y_n) of every step of one Euler solve."""

    def solve_started(self, solver: Any, y: Tensor) -> None:
        self.states: List[Tensor] = []
        self.slopes: List[Tensor] = []

    def stage_evaluated(self, step: int, stage: int, t: float, z: Tensor, k: Tensor) -> None:
        self.states.append(z)
        self.slopes.append(k)

    def solve_finished(self, y: Tensor) -> None:
        self.end = y


def _output(block: nn.Module, args: tuple, kwargs: dict) -> Tensor:
    out = type(block).forward(block, *args, **kwargs)
    return out[0] if isinstance(out, tuple) else out


def _moments(values: Tensor) -> Dict[str, Optional[float]]:
    """Max and mean over sentences (None where not finite: JSON has no infinity)."""
    values = values.double()
    moments = {"max": float(values.max()), "mean": float(values.mean())}
    return {k: v if math.isfinite(v) else None for k, v in moments.items()}


def block_error_bounds(call: BlockCall, keep: Tensor, refine: int = REFINE) -> Dict[str, object]:
    """The estimates, bounds and measured error of one block call (module docstring)."""
    block, args, kwargs = call
    solver = getattr(block, "solver", None)
    if not isinstance(block, ODEBlock) or not isinstance(solver, FixedGridSolver):
        return {"skipped": "not a fixed-grid Runge-Kutta block"}
    if solver.tableau.name != "euler" or solver.steps < 2:
        return {
            "skipped": f"the bound is forward Euler's with at least 2 steps; this block uses "
            f"{solver.method} with {solver.steps} step(s)"
        }
    observer = _EulerSteps()
    handle = block.register_observer(observer)
    with torch.no_grad():
        try:
            _output(block, args, kwargs)
        finally:
            handle.remove()
        block.solver = dataclasses.replace(solver, steps=solver.steps * refine)
        try:
            reference = _output(block, args, kwargs)
        finally:
            block.solver = solver
    h, interval = solver.step_size, solver.interval
    estimates = trajectory_estimates(observer.states, observer.slopes, h, keep)
    mask = keep.unsqueeze(-1).to(reference.dtype)
    measured = ((observer.end - reference) * mask).pow(2).sum(dim=(0, 2)).sqrt()
    scale = (reference * mask).pow(2).sum(dim=(0, 2)).sqrt()
    bounds = torch.tensor(
        [
            euler_error_bound(float(lip), interval, h, float(m))
            for lip, m in zip(estimates["lipschitz"], estimates["second_derivative"])
        ]
    )
    from_weights = weight_lipschitz(block)
    result: Dict[str, object] = {
        "method": solver.method,
        "steps": solver.steps,
        "step_size": h,
        "interval": interval,
        "sentences": int(keep.size(1)),
        "second_derivative_sup": _moments(estimates["second_derivative"]),
        "lipschitz_trajectory": _moments(estimates["lipschitz"]),
        "bound_trajectory": _moments(bounds),
        "measured_error": _moments(measured),
        "measured_relative_error": _moments(measured / scale.clamp_min(1e-30)),
        "reference_steps": solver.steps * refine,
        "lipschitz_weights": from_weights,
    }
    if from_weights is not None:
        result["bound_weights"] = _moments(
            torch.tensor(
                [euler_error_bound(from_weights, interval, h, float(m)) for m in estimates["second_derivative"]]
            )
        )
    else:
        result["lipschitz_weights_skipped"] = (
            "LayerNorm divides by the standard deviation, so the field has no global Lipschitz "
            "constant from its weights (CenterNorm fields have one)"
        )
    return result
