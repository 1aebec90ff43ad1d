"""The teacher of trajectory distillation: a trained pre-norm fairseq Transformer or ODE model.

A teacher's layer (block) outputs h^0 … h^L are the states its trajectory distils: a pre-norm
``transformer``'s or ``transformer_lm``'s layers, or the blocks of an ODE translation model or
language model (``ode_transformer``, ``ode_transformer_lm`` and their kinds; e.g. IIET with r
iterations distilled into the same architecture with fewer). Teachers are loaded with safe
unpickling, checked (a Transformer of the student's kind, translation or language model,
pre-norm, blocks without a layer history, the student's width and dictionaries: their symbols
where the teacher's checkpoint records them, else their sizes) and never trained. The
student's interface — embeddings, positions, final norms, output projection — may be copied
from the teacher.
"""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass
from typing import Any, ClassVar, Dict, List, Optional, Tuple, Union

from fairseq import models
from fairseq.models.transformer import TransformerModel
from fairseq.models.transformer_lm import TransformerLanguageModel
from torch import Tensor, nn

from ode_seq.checkpoint_files import load_checkpoint
from ode_seq.model_inputs import is_language_model, model_stacks
from ode_seq.options import option
from ode_seq.training_data.record import dictionary_mismatch, read_record

Teacher = Union[TransformerModel, TransformerLanguageModel]
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


@dataclass(frozen=True)
class TeacherInitialisation:
    """Where the student's interface comes from."""

    prefix: ClassVar[str] = ""
    init_from_teacher: Optional[str] = option(
        None,
        "copy embeddings, positions, final norms and output projection from this "
        "pre-norm fairseq transformer checkpoint when training starts (stable layer kind)",
        metavar="PATH",
    )


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


def _check_teacher_args(args: argparse.Namespace, sides: Tuple[str, ...], path: str) -> None:
    post_norm = [side for side in sides if not getattr(args, f"{side}_normalize_before", False)]
    if post_norm:
        raise ValueError(
            f"teacher {path} is a post-norm Transformer ({' and '.join(post_norm)} without "
            "--*-normalize-before): each of its layer outputs is re-normalised by LayerNorm after "
            "the residual update, so they are not states of one ODE trajectory x' = F(x); "
            "distil from a pre-norm teacher (train it with "
            f"{' '.join(f'--{side}-normalize-before' for side in sides)})"
        )
    mixed = [side for side in sides if getattr(args, f"{side}_layer_history", "none") != "none"]
    if mixed:
        raise ValueError(
            f"teacher {path} mixes earlier block outputs into each block's input "
            f"({' and '.join(f'--{side}-layer-history' for side in mixed)}), so its block outputs "
            "are not states of one trajectory: distil from a teacher without a layer history"
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


def load_teacher(path: Optional[str], task: Any) -> Teacher:
    """The teacher model of checkpoint ``path`` for ``task``'s dictionaries (a fairseq Transformer
    or Transformer LM, an ODE model's blocks integrating as it was trained): eval mode, frozen."""
    if not path:
        raise ValueError(
            "no teacher checkpoint given: pass --teacher-path with a pre-norm fairseq transformer "
            "or ODE model trained on the same data"
        )
    if not os.path.isfile(path):
        raise FileNotFoundError(
            f"teacher checkpoint {path} does not exist: train a pre-norm fairseq transformer "
            "first (see examples/distillation/run.sh) or fix --teacher-path"
        )
    state = load_checkpoint(path)
    args = _teacher_args(state, path)
    mismatch = dictionary_mismatch(read_record(state.get("task_state")), task)
    if mismatch:
        raise mismatch.naming(f"teacher {path}")
    _check_dictionaries(state["model"], task, path)
    teacher = models.build_model(argparse.Namespace(**vars(args)), task)
    if not isinstance(teacher, (TransformerModel, TransformerLanguageModel)):
        raise ValueError(
            f"teacher {path} is a {type(teacher).__name__}, not a fairseq Transformer or "
            "Transformer LM (--arch transformer, transformer_lm, ode_transformer, "
            "ode_transformer_lm or one of their architectures)"
        )
    _check_teacher_args(args, model_stacks(teacher), path)
    try:
        teacher.load_state_dict(state["model"], strict=True)
    except RuntimeError as error:
        raise ValueError(f"teacher {path} does not match its own configuration: {error}") from None
    teacher.eval()
    teacher.requires_grad_(False)
    teacher.path = path
    return teacher


def check_teacher_fits(teacher: Teacher, student: nn.Module) -> None:
    """The student is the teacher's kind (translation or language model) and its stacks have the
    teacher's widths (states are compared entry by entry)."""
    path = getattr(teacher, "path", "the teacher")
    if is_language_model(teacher) != is_language_model(student):
        kinds = {True: "a language model", False: "a translation model"}
        raise ValueError(
            f"teacher {path} is {kinds[is_language_model(teacher)]} but the student is "
            f"{kinds[is_language_model(student)]}: distil a student of the teacher's kind "
            "(--task language_modeling with an ode_transformer_lm* student for an LM teacher)"
        )
    for side in model_stacks(student):
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


def copy_interface(student: nn.Module, teacher: Teacher) -> List[str]:
    """Copy the teacher's interface modules into the student; returns the names copied."""
    check_teacher_fits(teacher, student)
    path = getattr(teacher, "path", "the teacher")
    for side in model_stacks(student):
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
