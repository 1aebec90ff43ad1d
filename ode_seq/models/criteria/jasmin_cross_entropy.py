"""Criterion ``label_smoothed_cross_entropy_jasmin``: label-smoothed CE plus the JaSMin penalty.

    loss = CE + λ_J · n · J,    J = mean over stacks of the trajectory JaSMin penalty

(:mod:`.jasmin`; n is fairseq's sample size, so after fairseq divides by n the
penalty enters per token; the stacks are a translation model's encoder and decoder or a language
model's decoder). The self-attention probabilities come from the stable ODE blocks of a
model of ``--layer-kind stable`` (:mod:`ode_seq.layers.recording`).
"""

from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from typing import Any, Dict, Iterator, Tuple

import torch
from fairseq.criterions import register_criterion
from fairseq.criterions.label_smoothed_cross_entropy import (
    LabelSmoothedCrossEntropyCriterion,
    LabelSmoothedCrossEntropyCriterionConfig,
)
from fairseq.logging import metrics
from torch import Tensor, nn

from ode_seq.layers.recording import SolverRecord, record_solver_steps
from ode_seq.model_inputs import model_stacks

from .jasmin import first_penalised_step, trajectory_jasmin


def unwrapped(model: nn.Module) -> nn.Module:
    """The model inside fairseq's wrappers (DDP and the like)."""
    while hasattr(model, "module"):
        model = model.module
    return model


@contextmanager
def record_model_stacks(model: nn.Module) -> Iterator[Dict[str, SolverRecord]]:
    """Per stack of ``model`` (encoder and decoder, or a language model's decoder), the solver
    states and attention of the forward passes inside the block."""
    with ExitStack() as context:
        yield {
            stack: context.enter_context(record_solver_steps(getattr(unwrapped(model), stack)))
            for stack in model_stacks(unwrapped(model))
        }


@dataclass
class JasminCriterionConfig(LabelSmoothedCrossEntropyCriterionConfig):
    jasmin_weight: float = field(default=1.0, metadata={"help": "weight of the JaSMin penalty (0 = only logged)"})
    jasmin_k: int = field(
        default=10,
        metadata={"help": "JaSMin compares g_1 with g_k (ODE-ViT: 10 from scratch, 2 distilled)"},
    )
    jasmin_step_fraction: float = field(
        default=0.85, metadata={"help": "penalise the field evaluations of the last fraction of steps"}
    )


@register_criterion("label_smoothed_cross_entropy_jasmin", dataclass=JasminCriterionConfig)
class JasminCrossEntropyCriterion(LabelSmoothedCrossEntropyCriterion):
    """Label-smoothed cross-entropy plus λ_J times the JaSMin penalty of the self-attention."""

    def __init__(
        self,
        task,
        sentence_avg: bool,
        label_smoothing: float,
        ignore_prefix_size: int = 0,
        report_accuracy: bool = False,
        jasmin_weight: float = 1.0,
        jasmin_k: int = 10,
        jasmin_step_fraction: float = 0.85,
    ) -> None:
        super().__init__(task, sentence_avg, label_smoothing, ignore_prefix_size, report_accuracy)
        if jasmin_weight < 0:
            raise ValueError(f"--jasmin-weight must be >= 0, got {jasmin_weight}")
        if jasmin_k < 2:
            raise ValueError(f"--jasmin-k must be >= 2 (k = 1 compares g_1 with itself), got {jasmin_k}")
        first_penalised_step(1, jasmin_step_fraction)
        self.jasmin_weight = jasmin_weight
        self.jasmin_k = jasmin_k
        self.jasmin_step_fraction = jasmin_step_fraction

    def recorded_forward(self, model, sample) -> Tuple[object, Dict[str, SolverRecord]]:
        """The model's output and, per stack, the solver states and attention it recorded."""
        with record_model_stacks(model) as records:
            net_output = model(**sample["net_input"])
        return net_output, records

    def jasmin(self, records: Dict[str, SolverRecord]) -> Tensor:
        """Mean over stacks of the JaSMin penalty of their last steps (no graph if unweighted)."""
        with torch.set_grad_enabled(torch.is_grad_enabled() and self.jasmin_weight > 0):
            penalties = [
                trajectory_jasmin(r.attention, r.total_steps, self.jasmin_k, self.jasmin_step_fraction)
                for r in records.values()
            ]
        return torch.stack(penalties).mean()

    def recorded_losses(self, model, sample) -> Tuple[Dict[str, SolverRecord], Tensor, Tensor, int]:
        """The solver records, summed label-smoothed CE and NLL, and fairseq's sample size n."""
        net_output, records = self.recorded_forward(model, sample)
        loss, nll_loss = self.compute_loss(model, net_output, sample, reduce=True)
        sample_size = sample["target"].size(0) if self.sentence_avg else sample["ntokens"]
        return records, loss, nll_loss, sample_size

    @staticmethod
    def logging_output(loss: Tensor, nll_loss: Tensor, sample, sample_size: int, **per_sample: Any) -> Dict[str, Any]:
        """fairseq's logged losses and counts, and each of :meth:`per_sample_metrics` (given per
        sample) times the sample size."""
        return {
            "loss": loss.data,
            "nll_loss": nll_loss.data,
            "ntokens": sample["ntokens"],
            "nsentences": sample["target"].size(0),
            "sample_size": sample_size,
            **{key: value * sample_size for key, value in per_sample.items()},
        }

    def forward(self, model, sample, reduce=True):
        if not reduce:
            raise ValueError(f"{type(self).__name__} computes summed losses only (reduce=True)")
        records, loss, nll_loss, sample_size = self.recorded_losses(model, sample)
        jasmin = self.jasmin(records)
        loss = loss + (self.jasmin_weight * sample_size) * jasmin
        return loss, sample_size, self.logging_output(loss, nll_loss, sample, sample_size, jasmin=jasmin.data)

    @classmethod
    def reduce_metrics(cls, logging_outputs) -> None:
        super().reduce_metrics(logging_outputs)
        sample_size = sum(log.get("sample_size", 0) for log in logging_outputs)
        for key in cls.per_sample_metrics():
            if not any(key in log for log in logging_outputs):
                continue  # a stack the model lacks (a language model's encoder)
            total = sum(log.get(key, 0) for log in logging_outputs)
            metrics.log_scalar(key, float(total) / max(sample_size, 1), sample_size, round=4)

    @staticmethod
    def per_sample_metrics() -> Tuple[str, ...]:
        """Logged as Σ value·sample_size, reported as the sample-size-weighted mean."""
        return ("jasmin",)
