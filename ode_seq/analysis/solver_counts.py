"""Function-evaluation counts of adaptive solvers, and step-count/score measurements.

The NFE of a sentence is the number of vector-field evaluations of the encoder's adaptive
blocks when that sentence is encoded alone (an adaptive step size is shared by a batch, so
sentences are solved one at a time), counted by an observer of each block's solve.

Step-count adaptation is measured outside this tool (a model evaluated at several step counts);
its results come as JSON ``{"steps": [...], "scores": [...], "metric": "BLEU"}``.
"""

from __future__ import annotations

import json
from typing import Dict, List, Sequence, Tuple

import torch
from torch import Tensor, nn

from ode_seq.layers.blocks import ode_blocks
from ode_seq.solvers import AdaptiveSolver, EvaluationCounter


def adaptive_blocks(stack: nn.Module) -> List[nn.Module]:
    """The blocks of ``stack`` that solve adaptively."""
    return [b for b in ode_blocks(stack) if isinstance(b.solver, AdaptiveSolver)]


def nfe_against_length(model: nn.Module, sources: Sequence[Tensor]) -> Tuple[List[int], List[int]]:
    """(source lengths, encoder NFE) for each source sentence, encoded one at a time."""
    counters = [EvaluationCounter() for _ in adaptive_blocks(model.encoder)]
    handles = [b.register_observer(c) for b, c in zip(adaptive_blocks(model.encoder), counters)]
    lengths, counts = [], []
    try:
        with torch.no_grad():
            for source in sources:
                model.encoder(source[None], torch.tensor([source.numel()]))
                lengths.append(int(source.numel()))
                counts.append(sum(c.count for c in counters))
    finally:
        for handle in handles:
            handle.remove()
    return lengths, counts


def read_step_scores(path: str) -> Dict[str, object]:
    """Validated ``{"steps", "scores", "metric"}`` from a JSON file."""
    expected = (
        'expected JSON {"steps": [...], "scores": [...], "metric": ...} with equally long, non-empty lists of numbers'
    )
    with open(path, encoding="utf-8") as f:
        try:
            data = json.load(f)
        except json.JSONDecodeError as error:
            raise ValueError(f"{path} is not valid JSON ({error}): {expected}") from None
    steps, scores = (data.get("steps"), data.get("scores")) if isinstance(data, dict) else (None, None)
    if (
        not isinstance(steps, list)
        or not isinstance(scores, list)
        or len(steps) != len(scores)
        or not steps
        or not all(isinstance(x, (int, float)) for x in steps + scores)
    ):
        raise ValueError(f"{path}: {expected}")
    return {
        "steps": [int(s) for s in steps],
        "scores": [float(s) for s in scores],
        "metric": str(data.get("metric", "score")),
    }
