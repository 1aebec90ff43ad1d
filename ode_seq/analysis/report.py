"""The analysis report: every figure as PNG plus ``report.json`` with the numbers behind them.

A figure whose subject the model lacks (no learned gates, no adaptive solver, …) is not drawn;
``report.json["figures"][name]`` then holds ``{"skipped": reason}`` instead of the file name.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Dict, List, Optional

import numpy as np
from torch import Tensor, nn

from ode_seq.model_inputs import batch_pass, is_language_model, model_stacks

from . import plots
from .error_bounds import block_error_bounds
from .layer_weights import stack_weights
from .solver_counts import adaptive_blocks, nfe_against_length
from .spectra import layer_spectra, spectrum_summary
from .token_sensitivity import capture_calls, context_sensitivity, sensitivity_json, sentence_sensitivity
from .trajectories import record_trajectories


@dataclass
class AnalysisInputs:
    """What the report analyses: a model, a validation batch and one sentence pair (for a language
    model: ``source`` its context, as the model reads it, and no ``target``)."""

    model: nn.Module
    batch: Dict[str, object]
    pad: int
    source: Tensor
    target: Optional[Tensor]
    token_string: object
    num_exponents: Optional[int] = None
    step_scores: Optional[Dict[str, object]] = None
    teacher_errors: Optional[Dict[str, List[Dict[str, float]]]] = None


class Report:
    """Collects numbers and figure outcomes, writes figures into ``out_dir``."""

    def __init__(self, out_dir: str) -> None:
        os.makedirs(out_dir, exist_ok=True)
        self.out_dir = out_dir
        self.data: Dict[str, object] = {"figures": {}}

    def figure(self, name: str) -> str:
        self.data["figures"][name] = f"{name}.png"
        return os.path.join(self.out_dir, f"{name}.png")

    def skip(self, name: str, reason: str) -> None:
        self.data["figures"][name] = {"skipped": reason}

    def write_json(self) -> str:
        path = os.path.join(self.out_dir, "report.json")
        with open(path + ".tmp", "w", encoding="utf-8") as f:
            json.dump(self.data, f, indent=1)
        os.replace(path + ".tmp", path)
        return path


def _complex_json(values: np.ndarray) -> Dict[str, List[float]]:
    return {"real": values.real.tolist(), "imag": values.imag.tolist()}


def add_trajectories(report: Report, inputs: AnalysisInputs) -> None:
    records = record_trajectories(inputs.model, inputs.batch["net_input"], inputs.pad)
    stats = {s: [r.statistics() for r in records[s]] for s in records if records[s]}
    report.data["trajectories"] = stats
    if not stats:
        reason = "the model has no Runge-Kutta blocks"
        for name in ("trajectory", "coefficients", "gates"):
            report.skip(name, reason)
        return
    plots.plot_trajectory_norms(stats, report.figure("trajectory"))
    kinds = ", ".join(sorted({r.coefficients for s in records for r in records[s]}))
    learned = {s: v for s, v in stats.items() if v[0]["coefficients"] in ("gate", "free", "ema")}
    if learned:
        plots.plot_coefficients(learned, report.figure("coefficients"))
    else:
        report.skip(
            "coefficients",
            "all blocks use their method's fixed weights (the tableau's "
            f"b: --ode-coefficients fixed, or one-stage methods; coefficients: {kinds})",
        )
    gates = {s: [r.weights for r in records[s]] for s in records if records[s] and records[s][0].coefficients == "gate"}
    if gates:
        plots.plot_gate_distributions(gates, report.figure("gates"))
    else:
        report.skip("gates", f"no learned gates (coefficients: {kinds})")


def add_spectra(report: Report, model: nn.Module) -> None:
    numbers: Dict[str, object] = {}
    summaries: Dict[str, List[Dict[str, object]]] = {}
    for stack in model_stacks(model):
        layers = [layer_spectra(w) for w in stack_weights(getattr(model, stack))]
        if not layers:
            report.skip(f"spectra_{stack}", f"the {stack} has no Transformer layers")
            continue
        flat = plots.spectra_points(layers)
        plots.plot_spectra(stack, flat, report.figure(f"spectra_{stack}"))
        summaries[stack] = [
            {"depth": f["depth"], **{p: spectrum_summary(v) for p, v in f.items() if p != "depth"}} for f in flat
        ]
        numbers[stack] = [
            {
                "depth": layer["depth"],
                **{
                    p: ([_complex_json(h) for h in v] if isinstance(v, list) else _complex_json(v))
                    for p, v in layer.items()
                    if p != "depth"
                },
            }
            for layer in layers
        ]
    report.data["spectra"] = {"eigenvalues": numbers, "summary": summaries}
    if summaries:
        plots.plot_spectra_along_depth(summaries, report.figure("spectra_depth"))
    else:
        report.skip("spectra_depth", "the model has no Transformer layers")


def add_lyapunov(report: Report, inputs: AnalysisInputs) -> None:
    if is_language_model(inputs.model):
        sensitivity = context_sensitivity(inputs.model, inputs.source, inputs.token_string, inputs.num_exponents)
    else:
        sensitivity = sentence_sensitivity(
            inputs.model, inputs.source, inputs.target, inputs.token_string, inputs.num_exponents
        )
    numbers = {s: sensitivity_json(v) for s, v in sensitivity.items()}
    report.data["lyapunov"] = numbers
    panels = {s: v for s, v in numbers.items() if "skipped" not in v}
    if panels:
        plots.plot_lyapunov_heatmap(panels, report.figure("lyapunov"))
    else:
        report.skip("lyapunov", "; ".join(f"{s}: {v['skipped']}" for s, v in numbers.items()))


def add_solver_counts(report: Report, inputs: AnalysisInputs) -> None:
    if not is_language_model(inputs.model) and adaptive_blocks(inputs.model.encoder):
        tokens = inputs.batch["net_input"]["src_tokens"]
        sources = [row[row.ne(inputs.pad)] for row in tokens]
        lengths, nfe = nfe_against_length(inputs.model, sources)
        report.data["nfe_vs_length"] = {"lengths": lengths, "nfe": nfe}
        plots.plot_nfe_vs_length(lengths, nfe, report.figure("nfe_vs_length"))
    else:
        report.skip("nfe_vs_length", "no adaptive solver: no encoder block solves adaptively")
    if inputs.step_scores is not None:
        report.data["score_vs_steps"] = inputs.step_scores
        plots.plot_score_vs_steps(
            inputs.step_scores["steps"],
            inputs.step_scores["scores"],
            inputs.step_scores["metric"],
            report.figure("score_vs_steps"),
        )
    else:
        report.skip(
            "score_vs_steps",
            'no step-count measurements: pass --step-scores FILE with {"steps": [...], "scores": [...], "metric": ...}',
        )


def add_error_bounds(report: Report, inputs: AnalysisInputs) -> None:
    """Euler's global error bound and the measured error of every Euler block on the batch."""
    model_pass = batch_pass(inputs.model, inputs.batch["net_input"])
    calls = capture_calls(inputs.model, model_pass)
    keep = model_pass.keep(inputs.pad)
    report.data["euler_error_bounds"] = {
        side: [block_error_bounds(call, keep[side]) for call in calls[side]] for side in calls
    }


def add_teacher_errors(report: Report, inputs: AnalysisInputs) -> None:
    if inputs.teacher_errors is None:
        report.skip("teacher_errors", "no teacher: pass --teacher PATH (the distillation teacher)")
        return
    report.data["teacher_errors"] = inputs.teacher_errors
    plots.plot_teacher_errors(inputs.teacher_errors, report.figure("teacher_errors"))


def write_report(inputs: AnalysisInputs, out_dir: str, header: Dict[str, object]) -> str:
    """Run every analysis, write the figures and ``report.json``; returns the JSON path."""
    report = Report(out_dir)
    report.data.update(header)
    add_trajectories(report, inputs)
    add_spectra(report, inputs.model)
    add_lyapunov(report, inputs)
    add_solver_counts(report, inputs)
    add_error_bounds(report, inputs)
    add_teacher_errors(report, inputs)
    return report.write_json()
