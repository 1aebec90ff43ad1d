"""How far a distilled student's trajectory is from its teacher's layers, layer by layer.

The teacher's layer outputs h^0 … h^L (encoder: ``return_all_hiddens``; decoder: inner states
under teacher forcing) are the targets of trajectory distillation at control times t_1 … t_L
(:mod:`.criteria.trajectory_loss`). For every teacher layer ℓ ≥ 1 and the student's state
X(t_ℓ) (its state after the solver step nearest t_ℓ), over the non-padding tokens i:

    error_ℓ = mean_i ‖X_i(t_ℓ) − h_i^ℓ‖₂,    relative_ℓ = (Σ_i ‖X_i(t_ℓ) − h_i^ℓ‖² / Σ_i ‖h_i^ℓ‖²)^½

(relative_ℓ² is layer ℓ's term of the training loss L_traj). Distance-based control times use
the mean layer-to-layer distances of the batch analysed, where training used their running mean.
"""

from __future__ import annotations

from typing import Dict, List

import torch
from torch import Tensor, nn

from ode_seq.model_inputs import batch_pass, is_language_model

from .criteria.jasmin_cross_entropy import record_model_stacks
from .criteria.trajectory_loss import control_times, layer_distance_sums, nearest_steps, relative_squared_error


@torch.no_grad()
def teacher_layer_states(teacher: nn.Module, net_input: Dict[str, Tensor]) -> Dict[str, List[Tensor]]:
    """The teacher's h^0 … h^L of each stack (before the final LayerNorm), each (T, B, d)."""
    if is_language_model(teacher):
        _, extra = teacher.decoder(net_input["src_tokens"], features_only=True)
        return {"decoder": extra["inner_states"]}
    encoder_out = teacher.encoder(
        net_input["src_tokens"], src_lengths=net_input["src_lengths"], return_all_hiddens=True
    )
    _, extra = teacher.decoder(net_input["prev_output_tokens"], encoder_out=encoder_out, features_only=True)
    return {"encoder": encoder_out["encoder_states"], "decoder": extra["inner_states"]}


def stack_masks(model: nn.Module, net_input: Dict[str, Tensor], source_pad: int, target_pad: int) -> Dict[str, Tensor]:
    """Per stack of ``model``, the (T, B) mask of the non-padding positions its states are."""
    pads = {"encoder": source_pad, "decoder": target_pad}
    return {stack: tokens.ne(pads[stack]).t() for stack, tokens in batch_pass(model, net_input).tokens.items()}


@torch.no_grad()
def trajectory_errors(
    student: nn.Module,
    teacher: nn.Module,
    net_input: Dict[str, Tensor],
    source_pad: int,
    target_pad: int,
    mode: str = "distance",
    temperature: float = 30.0,
) -> Dict[str, List[Dict[str, float]]]:
    """Per stack, one entry per teacher layer ℓ = 1 … L (module docstring)."""
    with record_model_stacks(student) as records:
        student(**net_input)
    keep = stack_masks(student, net_input, source_pad, target_pad)
    teacher_states = teacher_layer_states(teacher, net_input)
    errors: Dict[str, List[Dict[str, float]]] = {}
    for stack in records:
        record, states, mask = records[stack], teacher_states[stack], keep[stack]
        sums, tokens = layer_distance_sums(states, mask)
        times = control_times(sums / max(tokens, 1), record.clock, mode, temperature)
        steps = nearest_steps(record.times, times)
        errors[stack] = []
        for layer, (t, step) in enumerate(zip(times.tolist(), steps), start=1):
            x, h = record.states[step].float(), states[layer].float()
            distance = (x - h).norm(dim=-1)[mask]
            errors[stack].append(
                {
                    "layer": layer,
                    "control_time": t,
                    "step_time": record.times[step],
                    "error": float(distance.mean()),
                    "relative": float(relative_squared_error(x, h, mask).sqrt()),
                    "teacher_norm": float(h.norm(dim=-1)[mask].mean()),
                }
            )
    return errors
