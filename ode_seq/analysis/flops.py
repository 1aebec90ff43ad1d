"""Counted FLOPs per token of a model on one real batch (``torch.utils.flop_counter``).

training FLOPs / token  = (forward + backward of the training loss on the batch) / target tokens
inference FLOPs / token = (forward in eval mode + log-probabilities over the vocabulary) / target tokens

torch's counter counts matrix products and attention (mm, addmm, bmm, baddbmm, scaled dot-product
attention, convolutions), 2 FLOPs per multiply–add; elementwise work (norms, activations, dropout,
Runge–Kutta combinations) is not counted, which is a few per cent of a Transformer's total and the
same kind of work in every configuration. An ODE model reuses its parameters at every stage, so the
6N / 2N rule of thumb (N parameters) is wrong for it by construction: this counts what runs.
For a translation model the target tokens carry the encoder's work too (its FLOPs over the batch's
source tokens), so per-token numbers compare models on the same data.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, List, Sequence, Tuple

import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode


@dataclass(frozen=True)
class FlopCount:
    """FLOPs of one batch of ``tokens`` target tokens."""

    tokens: int
    training: int  # forward + backward of the loss
    inference: int  # forward in eval mode + normalised output probabilities

    @property
    def training_per_token(self) -> float:
        return self.training / self.tokens

    @property
    def inference_per_token(self) -> float:
        return self.inference / self.tokens

    def lines(self) -> str:
        """``key=value`` lines, as ``ode-seq flops`` prints them and the studies keep them."""
        return (
            f"tokens={self.tokens}\ntraining_flops={self.training}\ninference_flops={self.inference}\n"
            f"training_flops_per_token={self.training_per_token:.6g}\n"
            f"inference_flops_per_token={self.inference_per_token:.6g}\n"
        )

    @classmethod
    def parse(cls, text: str, source: str) -> "FlopCount":
        """The count that :meth:`lines` wrote (``source`` names it in errors)."""
        values = dict(line.split("=", 1) for line in text.splitlines() if "=" in line)
        try:
            return cls(int(values["tokens"]), int(values["training_flops"]), int(values["inference_flops"]))
        except (KeyError, ValueError) as error:
            raise ValueError(
                f"{source} is not a FLOP count of `ode-seq flops` ({error}): delete it and rerun"
            ) from None


def read_flop_counts(directory: Path, configs: Sequence[str], study: str) -> Dict[str, FlopCount]:
    """Each configuration's count, DIRECTORY/CONFIG.txt (``study`` counts them: its name goes in the error)."""
    counts = {}
    for config in configs:
        path = directory / f"{config}.txt"
        if not path.is_file():
            raise ValueError(f"{path} is missing: rerun {study}, which counts each configuration's FLOPs")
        counts[config] = FlopCount.parse(path.read_text(encoding="utf-8"), str(path))
    return counts


def counted_flops(work: Callable[[], Any]) -> int:
    """The FLOPs torch's counter sees while ``work()`` runs."""
    counter = FlopCounterMode(display=False)
    with counter:
        work()
    return counter.get_total_flops()


def count_flops(
    model: nn.Module, loss: Callable[[], torch.Tensor], net_input: Dict[str, Any], tokens: int
) -> FlopCount:
    """Count one training step's forward and backward (``loss()`` computes the training loss of the
    batch with ``model`` in train mode) and one inference forward of ``net_input``; ``model`` is left
    in eval mode with its gradients cleared."""
    model.train()
    model.zero_grad(set_to_none=True)
    training = counted_flops(lambda: loss().backward())
    model.zero_grad(set_to_none=True)
    model.eval()

    def infer() -> None:
        with torch.no_grad():
            model.get_normalized_probs(model(**net_input), log_probs=True)

    return FlopCount(tokens=tokens, training=training, inference=counted_flops(infer))


EPOCH_SUMMARY = re.compile(r"\| train \| epoch (\d+) \| .*?\| wpb ([\d.]+) \| .*?\| num_updates (\d+) \|")


def training_tokens(log: str) -> List[float]:
    """The training tokens seen by the end of each epoch of a fairseq-train log: Σ over epochs of
    that epoch's updates × its mean tokens per update (wpb). An epoch logged twice (a resumed run
    trained it again) counts once, as its last summary says."""
    summaries = {int(epoch): (float(wpb), int(updates)) for epoch, wpb, updates in EPOCH_SUMMARY.findall(log)}
    seen, total, before = [], 0.0, 0
    for epoch in sorted(summaries):
        wpb, updates = summaries[epoch]
        total += wpb * (updates - before)
        before = updates
        seen.append(total)
    return seen


def pareto_front(points: Sequence[Tuple[float, float]]) -> List[int]:
    """Indices of the points (cost, loss) that no other point beats on both (lower is better for
    both), by increasing cost: the lower-left envelope."""
    front: List[int] = []
    for index in sorted(range(len(points)), key=lambda i: points[i]):
        if not front or points[index][1] < points[front[-1]][1]:
            front.append(index)
    return front
