"""Teacher-trajectory distillation: ODE-ViT's plug & play teacher–student for seq2seq.

A trained discrete pre-norm Transformer is the teacher. Its layer outputs h^0 (embeddings),
h^1 … h^L are read as samples of an ODE solution at control times 0 < t_1 < … < t_L = T, where T
is the student stack's integration interval (its number of layers):

    uniform:   t_ℓ = ℓ·T/L
    distance:  t_ℓ = T·Σ_{m≤ℓ} softmax(d/τ)_m,   d_m = mean over tokens of ‖h^m − h^{m−1}‖₂

so more solver steps go where consecutive teacher layers differ most (τ = 30 in ODE-ViT; τ → ∞
is uniform). The student's state X(t_ℓ) is its state after the solver step nearest t_ℓ, and

    L_traj = (1/L) Σ_ℓ  Σ_i ‖X_i(t_ℓ) − h_i^ℓ‖²  /  Σ_i ‖h_i^ℓ‖²        (i: non-padding tokens)

is the per-layer-normalised MSE. Teachers are loaded with safe unpickling, checked (a
Transformer, pre-norm, the student's width and dictionaries) and never trained. The student's
interface — embeddings, positions, final norms, output projection — may be copied from the teacher.
"""
from __future__ import annotations

import argparse
import os
from typing import Any, Dict, List, Optional, Sequence, Tuple

import torch
from fairseq import models
from fairseq.models.transformer import TransformerModel
from torch import Tensor, nn

from .checkpoint_safety import load_checkpoint

CONTROL_TIME_MODES = ("uniform", "distance")
INTERFACE_MODULES = (
    "encoder.embed_tokens",
    "encoder.embed_positions",
    "encoder.layernorm_embedding",
    "encoder.layer_norm",
    "decoder.embed_tokens",
    "decoder.embed_positions",
    "decoder.layernorm_embedding",
    "decoder.project_in_dim",
    "decoder.layer_norm",
    "decoder.project_out_dim",
    "decoder.output_projection",
)


def control_times(
    distances: Tensor, total_time: float, mode: str = "distance", temperature: float = 30.0
) -> Tensor:
    """t_1 … t_L on [0, T] for L teacher layers with mean layer-to-layer distances d_1 … d_L."""
    layers = distances.numel()
    if mode == "uniform":
        weights = torch.full((layers,), 1.0 / layers, dtype=torch.float64)
    elif mode == "distance":
        if temperature <= 0:
            raise ValueError(f"the control-time temperature must be positive, got {temperature}")
        weights = torch.softmax(distances.double() / temperature, dim=0)
    else:
        raise ValueError(f"control times {mode!r} are not valid; choose one of: {', '.join(CONTROL_TIME_MODES)}")
    times = total_time * torch.cumsum(weights, dim=0)
    times[-1] = total_time
    return times


def nearest_steps(step_times: Sequence[float], times: Tensor) -> List[int]:
    """For each control time the index of the nearest step time (the earlier one on ties)."""
    grid = torch.tensor(list(step_times), dtype=torch.float64)
    return [int(torch.argmin((grid - t).abs())) for t in times.double()]


def layer_distance_sums(states: Sequence[Tensor], keep: Tensor) -> Tuple[Tensor, int]:
    """(Σ_i ‖h_i^m − h_i^{m−1}‖ for m = 1 … L, number of tokens i); states (T, B, C), keep (T, B)."""
    sums = torch.stack([
        ((b.float() - a.float()).norm(dim=-1) * keep).sum() for a, b in zip(states[:-1], states[1:])
    ])
    return sums, int(keep.sum())


class DistanceMean:
    """Running token-weighted mean of the teacher's layer-to-layer distances d_1 … d_L."""

    def __init__(self) -> None:
        self.sums: Optional[Tensor] = None
        self.tokens = 0

    def update(self, sums: Tensor, tokens: int) -> None:
        sums = sums.detach().double().cpu()
        self.sums = sums if self.sums is None else self.sums + sums
        self.tokens += tokens

    def mean(self, fallback: Tuple[Tensor, int]) -> Tensor:
        """The running mean; ``fallback`` (sums, tokens) when nothing was accumulated yet."""
        if self.sums is None or self.tokens == 0:
            sums, tokens = fallback
            return sums.detach().double().cpu() / max(tokens, 1)
        return self.sums / self.tokens


def relative_squared_error(x: Tensor, h: Tensor, keep: Tensor) -> Tensor:
    """Σ_i ‖x_i − h_i‖² / Σ_i ‖h_i‖² over the tokens i where ``keep`` (T, B) is true."""
    mask = keep.unsqueeze(-1).float()
    h = h.float()
    error = ((x.float() - h).pow(2) * mask).sum()
    scale = (h.pow(2) * mask).sum().clamp_min(1e-12)
    return error / scale


def trajectory_loss(
    student_states: Sequence[Tensor],
    step_times: Sequence[float],
    teacher_states: Sequence[Tensor],
    keep: Tensor,
    times: Tensor,
) -> Tensor:
    """(1/L) Σ_ℓ relative squared error of X(t_ℓ) (nearest step) against h^ℓ, ℓ = 1 … L."""
    steps = nearest_steps(step_times, times)
    errors = [
        relative_squared_error(student_states[s], teacher_states[layer + 1], keep)
        for layer, s in enumerate(steps)
    ]
    return torch.stack(errors).mean()


def curriculum_weight(update: int, start: int, warmup: int, final: float) -> float:
    """0 before update ``start``, then a linear ramp over ``warmup`` updates up to ``final``."""
    if update < start:
        return 0.0
    if warmup <= 0:
        return final
    return final * min(1.0, (update - start + 1) / warmup)


def _teacher_args(state: Dict[str, Any], path: str) -> argparse.Namespace:
    cfg = state.get("cfg")
    args = cfg.get("model") if isinstance(cfg, dict) else None
    if args is None:
        args = state.get("args")
    if not isinstance(args, argparse.Namespace):
        raise ValueError(
            f"teacher {path} holds no fairseq model configuration (cfg.model or args); pass a "
            "checkpoint written by fairseq-train"
        )
    return args


def _check_teacher_args(args: argparse.Namespace, path: str) -> None:
    post_norm = [
        side for side in ("encoder", "decoder")
        if not getattr(args, f"{side}_normalize_before", False)
    ]
    if post_norm:
        raise ValueError(
            f"teacher {path} is a post-norm Transformer ({' and '.join(post_norm)} without "
            "--*-normalize-before): each of its layer outputs is re-normalised by LayerNorm after "
            "the residual update, so they are not states of one ODE trajectory x' = F(x); "
            "distil from a pre-norm teacher (train it with --encoder-normalize-before "
            "--decoder-normalize-before)"
        )


def _check_dictionaries(model_state: Dict[str, Tensor], task: Any, path: str) -> None:
    for side, dictionary in (("encoder", task.source_dictionary), ("decoder", task.target_dictionary)):
        weight = model_state.get(f"{side}.embed_tokens.weight")
        if weight is not None and weight.size(0) != len(dictionary):
            raise ValueError(
                f"teacher {path} has a {side} vocabulary of {weight.size(0)} entries but the "
                f"data's dictionary has {len(dictionary)}: distil on the data the teacher was "
                "trained on (same fairseq-preprocess dictionaries)"
            )


def load_teacher(path: Optional[str], task: Any) -> TransformerModel:
    """The teacher model of checkpoint ``path`` for ``task``'s dictionaries: eval mode, frozen."""
    if not path:
        raise ValueError(
            "no teacher checkpoint given: pass --teacher-path with a pre-norm fairseq transformer "
            "trained on the same data"
        )
    if not os.path.isfile(path):
        raise FileNotFoundError(
            f"teacher checkpoint {path} does not exist: train a pre-norm fairseq transformer "
            "first (see examples/distillation/run.sh) or fix --teacher-path"
        )
    state = load_checkpoint(path)
    args = _teacher_args(state, path)
    _check_teacher_args(args, path)
    _check_dictionaries(state["model"], task, path)
    teacher = models.build_model(argparse.Namespace(**vars(args)), task)
    if not isinstance(teacher, TransformerModel):
        raise ValueError(
            f"teacher {path} is a {type(teacher).__name__}, not a fairseq Transformer "
            "(--arch transformer or one of its architectures)"
        )
    try:
        teacher.load_state_dict(state["model"], strict=True)
    except RuntimeError as error:
        raise ValueError(f"teacher {path} does not match its own configuration: {error}") from None
    teacher.eval()
    teacher.requires_grad_(False)
    teacher.path = path
    return teacher


def check_teacher_fits(teacher: TransformerModel, student: nn.Module) -> None:
    """The student's stacks have the teacher's widths (states are compared entry by entry)."""
    path = getattr(teacher, "path", "the teacher")
    for side in ("encoder", "decoder"):
        t_dim = getattr(teacher, side).embed_tokens.embedding_dim
        s_dim = getattr(student, side).embed_tokens.embedding_dim
        if t_dim != s_dim:
            raise ValueError(
                f"teacher {path} has model dimension {t_dim} in the {side} but the student has "
                f"{s_dim}: the trajectory loss compares states of equal width; build the student "
                f"with --{side}-embed-dim {t_dim} (and matching --{side}-attention-heads)"
            )


def _submodule(model: nn.Module, dotted: str) -> Optional[nn.Module]:
    module: Optional[nn.Module] = model
    for name in dotted.split("."):
        module = getattr(module, name, None)
        if module is None:
            return None
    return module


def interface_parameters(model: nn.Module) -> List[nn.Parameter]:
    """The distinct parameters of the student's interface modules (embeddings … output)."""
    seen: Dict[int, nn.Parameter] = {}
    for dotted in INTERFACE_MODULES:
        module = _submodule(model, dotted)
        if module is not None:
            for p in module.parameters():
                seen.setdefault(id(p), p)
    return list(seen.values())


def copy_interface(student: nn.Module, teacher: TransformerModel) -> List[str]:
    """Copy the teacher's interface modules into the student; returns the names copied."""
    check_teacher_fits(teacher, student)
    path = getattr(teacher, "path", "the teacher")
    for side in ("encoder", "decoder"):
        t_scale, s_scale = getattr(teacher, side).embed_scale, getattr(student, side).embed_scale
        if t_scale != s_scale:
            raise ValueError(
                f"teacher {path} scales {side} embeddings by {t_scale} but the student by {s_scale}:"
                " match --no-scale-embedding"
            )
    copied = []
    for dotted in INTERFACE_MODULES:
        t_module, s_module = _submodule(teacher, dotted), _submodule(student, dotted)
        if t_module is None and s_module is None:
            continue
        if t_module is None or s_module is None or type(t_module) is not type(s_module):
            raise ValueError(
                f"{dotted} is {type(t_module).__name__} in teacher {path} but "
                f"{type(s_module).__name__} in the student: build the student with the teacher's "
                "embedding options (--*-learned-pos, --layernorm-embedding, --share-*)"
            )
        try:
            s_module.load_state_dict(t_module.state_dict())
        except RuntimeError as error:
            raise ValueError(f"cannot copy {dotted} from teacher {path}: {error}") from None
        copied.append(dotted)
    return copied
