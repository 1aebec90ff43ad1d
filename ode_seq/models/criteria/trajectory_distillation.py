"""Criterion ``ode_trajectory_distillation``: an ODE student follows a discrete teacher's layers.

    loss = w_CE(u) · CE + n · (λ_traj · L_traj + λ_J · J)

- L_traj: the per-layer-normalised MSE between the student's states at the control times and
  the teacher's layer outputs, averaged over encoder (teacher: return_all_hiddens) and decoder
  (teacher: inner states under teacher forcing), or over a language model's decoder
  (:mod:`.trajectory_loss`). Distance-based
  control times use the running mean of the teacher's layer-to-layer distances over the
  training batches seen so far (recomputed from the first batches after a restart).
- w_CE(u): 0 before update ``--ce-start-update``, then a linear ramp to ``--ce-weight`` over
  ``--ce-warmup-updates`` (the curriculum: cross-entropy joins later).
- J: JaSMin on the student's self-attention (k = 2 by default, as ODE-ViT distils).

The teacher (a pre-norm ``transformer`` or ``transformer_lm``, or an ODE model, :mod:`..teacher`)
is loaded once, in eval mode and without gradients; it is kept outside the criterion's
submodules, so it is never saved, optimised or wrapped by DDP. The student is an ODE model of the
teacher's kind (``ode_transformer`` or ``ode_transformer_lm`` or one of their kinds; it records
the update count); JaSMin needs stable
blocks (``--layer-kind stable``), other students take ``--jasmin-weight 0``. With
``--init-from-teacher`` a stable student's interface (embeddings … output projection) can stay
frozen for ``--freeze-interface-updates``. An ODE teacher distils into the same architecture with
fewer iterations or steps (IIET's efficiency step): the student starts from the teacher's weights
(``--finetune-from-model``), and uniform control times match block ℓ to the teacher's block ℓ.
"""

import os
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

import torch
from fairseq.criterions import register_criterion
from fairseq.dataclass import ChoiceEnum
from torch import Tensor, nn

from ode_seq.layers.blocks import ode_blocks
from ode_seq.layers.recording import SolverRecord
from ode_seq.layers.stable.attention import StableMultiheadAttention
from ode_seq.model_inputs import model_stacks

from ..teacher import check_teacher_fits, load_teacher
from ..trajectory_errors import stack_masks, teacher_layer_states
from .jasmin_cross_entropy import JasminCriterionConfig, JasminCrossEntropyCriterion, unwrapped
from .trajectory_loss import (
    CONTROL_TIME_MODES,
    DistanceMean,
    control_times,
    curriculum_weight,
    layer_distance_sums,
    trajectory_loss,
)


@dataclass
class TrajectoryDistillationConfig(JasminCriterionConfig):
    teacher_path: Optional[str] = field(
        default=None,
        metadata={"help": "checkpoint of the pre-norm fairseq transformer or ODE model to distil (required)"},
    )
    trajectory_weight: float = field(default=1.0, metadata={"help": "weight of L_traj"})
    control_times: ChoiceEnum(CONTROL_TIME_MODES) = field(
        default="distance",
        metadata={
            "help": "control times of the teacher layers: uniform, or softmax of the teacher's layer-to-layer distances"
        },
    )
    control_time_temperature: float = field(default=30.0, metadata={"help": "temperature τ of the distance softmax"})
    ce_weight: float = field(default=1.0, metadata={"help": "final weight of the cross-entropy"})
    ce_start_update: int = field(default=0, metadata={"help": "the cross-entropy weight is 0 before this update"})
    ce_warmup_updates: int = field(default=0, metadata={"help": "updates over which the cross-entropy weight ramps up"})
    freeze_interface_updates: int = field(
        default=0,
        metadata={
            "help": "keep the teacher-initialised embeddings, final norms and output "
            "projection frozen for this many updates (needs --init-from-teacher; with "
            "DDP add --find-unused-parameters)"
        },
    )
    jasmin_k: int = field(default=2, metadata={"help": "JaSMin compares g_1 with g_k"})


@register_criterion("ode_trajectory_distillation", dataclass=TrajectoryDistillationConfig)
class TrajectoryDistillationCriterion(JasminCrossEntropyCriterion):
    """Trajectory matching to a teacher + curriculum cross-entropy + JaSMin."""

    def __init__(self, task, cfg: TrajectoryDistillationConfig) -> None:
        super().__init__(
            task,
            cfg.sentence_avg,
            cfg.label_smoothing,
            cfg.ignore_prefix_size,
            cfg.report_accuracy,
            cfg.jasmin_weight,
            cfg.jasmin_k,
            cfg.jasmin_step_fraction,
        )
        if cfg.control_times not in CONTROL_TIME_MODES:
            raise ValueError(f"--control-times must be one of {', '.join(CONTROL_TIME_MODES)}")
        if cfg.control_time_temperature <= 0:
            raise ValueError(f"--control-time-temperature must be > 0, got {cfg.control_time_temperature}")
        for option in (
            "trajectory_weight",
            "ce_weight",
            "ce_start_update",
            "ce_warmup_updates",
            "freeze_interface_updates",
        ):
            if getattr(cfg, option) < 0:
                raise ValueError(f"--{option.replace('_', '-')} must be >= 0, got {getattr(cfg, option)}")
        self.__dict__["_teacher"] = load_teacher(cfg.teacher_path, task)
        self.teacher_path = cfg.teacher_path
        self.trajectory_weight = cfg.trajectory_weight
        self.control_time_mode = str(cfg.control_times)
        self.control_time_temperature = cfg.control_time_temperature
        self.ce_weight = cfg.ce_weight
        self.ce_start_update = cfg.ce_start_update
        self.ce_warmup_updates = cfg.ce_warmup_updates
        self.freeze_interface_updates = cfg.freeze_interface_updates
        self.source_padding_idx = task.source_dictionary.pad()
        self._distances = {stack: DistanceMean() for stack in ("encoder", "decoder")}
        self._student_checked = False
        self._stable_student = True

    @property
    def teacher(self) -> nn.Module:
        """The frozen teacher (not a submodule: never saved, optimised or DDP-wrapped)."""
        return self.__dict__["_teacher"]

    def _check_student(self, student: nn.Module) -> None:
        if not hasattr(student, "num_updates") or not hasattr(student, "interface_parameters"):
            raise ValueError(
                "ode_trajectory_distillation needs an ODE model as student (e.g. --arch "
                "stable_ode_transformer_small, ode_transformer_rk4_encdec_small or ode_transformer_lm_rk4), "
                f"got {type(student).__name__}"
            )
        self._stable_student = any(isinstance(b.self_attn, StableMultiheadAttention) for b in ode_blocks(student))
        if not self._stable_student and self.jasmin_weight > 0:
            raise ValueError(
                f"--jasmin-weight {self.jasmin_weight}: JaSMin penalises the self-attention of stable "
                f"ODE blocks, which this {type(student).__name__} student has none of: pass "
                "--jasmin-weight 0, or distil into a student of --layer-kind stable (e.g. --arch "
                "stable_ode_transformer_small)"
            )
        check_teacher_fits(self.teacher, student)
        for stack in model_stacks(student):
            if getattr(student, stack).ode.layer_history != "none":
                raise ValueError(
                    f"--{stack}-layer-history mixes block outputs, so the student's states are "
                    "not one trajectory; distil a student without layer history"
                )
        initialised_from = getattr(student.args, "init_from_teacher", None)
        if initialised_from and os.path.realpath(initialised_from) != os.path.realpath(self.teacher_path):
            raise ValueError(
                f"the student was initialised from {initialised_from} but --teacher-path is "
                f"{self.teacher_path}: distil from the teacher the student was initialised from"
            )
        if self.freeze_interface_updates > 0 and not initialised_from:
            raise ValueError(
                "--freeze-interface-updates keeps teacher-initialised embeddings frozen, but the "
                "student was not initialised from the teacher: add --init-from-teacher PATH"
            )
        self._student_checked = True

    def _freeze_interface(self, student: nn.Module) -> None:
        trainable = student.num_updates >= self.freeze_interface_updates
        for p in student.interface_parameters():
            p.requires_grad_(trainable)

    @torch.no_grad()
    def teacher_states(self, sample, device: torch.device) -> Dict[str, List[Tensor]]:
        """The teacher's h^0 … h^L of each stack (before the final LayerNorm)."""
        teacher = self.teacher
        if next(teacher.parameters()).device != device:
            teacher.to(device)
        return teacher_layer_states(teacher, sample["net_input"])

    def _stack_loss(
        self, stack: str, record: SolverRecord, states: List[Tensor], keep: Tensor, training: bool
    ) -> Tensor:
        layers = len(states) - 1
        if len(record.states) < layers:
            raise ValueError(
                f"the student's {stack} takes {len(record.states)} solver steps but the teacher has "
                f"{layers} layers: give every control time its own step, e.g. --{stack}-ode-steps "
                f"{layers}"
            )
        batch_distances = layer_distance_sums(states, keep)
        if training:
            self._distances[stack].update(*batch_distances)
        times = control_times(
            self._distances[stack].mean(fallback=batch_distances),
            record.clock,
            self.control_time_mode,
            self.control_time_temperature,
        )
        return trajectory_loss(record.states, record.times, states, keep, times)

    def forward(self, model, sample, reduce=True):
        if not reduce:
            raise ValueError(f"{type(self).__name__} computes summed losses only (reduce=True)")
        student = unwrapped(model)
        if not self._student_checked:
            self._check_student(student)
        if model.training and self.freeze_interface_updates > 0:
            self._freeze_interface(student)
        records, ce_loss, nll_loss, sample_size = self.recorded_losses(model, sample)

        keep = stack_masks(student, sample["net_input"], self.source_padding_idx, self.padding_idx)
        teacher = self.teacher_states(sample, ce_loss.device)
        stack_losses = {
            stack: self._stack_loss(stack, record, teacher[stack], keep[stack], model.training)
            for stack, record in records.items()
        }
        trajectory = torch.stack(list(stack_losses.values())).mean()
        jasmin = self.jasmin(records) if self._stable_student else trajectory.new_zeros(())
        ce_weight = curriculum_weight(student.num_updates, self.ce_start_update, self.ce_warmup_updates, self.ce_weight)
        loss = ce_weight * ce_loss + sample_size * (self.trajectory_weight * trajectory + self.jasmin_weight * jasmin)
        logging_output = self.logging_output(
            loss,
            nll_loss,
            sample,
            sample_size,
            jasmin=jasmin.data,
            trajectory=trajectory.data,
            ce_weight=ce_weight,
            **{f"{stack}_trajectory": value.data for stack, value in stack_losses.items()},
        )
        return loss, sample_size, logging_output

    @staticmethod
    def per_sample_metrics() -> Tuple[str, ...]:
        return ("jasmin", "trajectory", "encoder_trajectory", "decoder_trajectory", "ce_weight")
