"""Function-evaluation counts of adaptive solvers, and step-count/score measurements.

Protocol for adaptive solvers: a module that integrates adaptively exposes an integer attribute
``nfe``, the number of vector-field evaluations of its most recent forward pass. The NFE of a
sentence is the sum over such modules after encoding that sentence alone (an adaptive step size
is shared by a batch, so sentences are solved one at a time).

Step-count adaptation is measured outside this tool (a model evaluated at several step counts);
its results come as JSON ``{"steps": [...], "scores": [...], "metric": "BLEU"}``.
"""
from __future__ import annotations

import json
from typing import Dict, List, Sequence, Tuple

import torch
from torch import Tensor, nn


def nfe_modules(model: nn.Module) -> List[nn.Module]:
    """Modules that report an NFE count (see the module docstring)."""
    return [m for m in model.modules() if isinstance(getattr(m, "nfe", None), int)]


def nfe_against_length(
    model: nn.Module, sources: Sequence[Tensor]
) -> Tuple[List[int], List[int]]:
    """(source lengths, encoder NFE) for each source sentence, encoded one at a time."""
    counters = nfe_modules(model.encoder)
    lengths, counts = [], []
    with torch.no_grad():
        for source in sources:
            model.encoder(source[None], torch.tensor([source.numel()]))
            lengths.append(int(source.numel()))
            counts.append(sum(m.nfe for m in counters))
    return lengths, counts


def read_step_scores(path: str) -> Dict[str, object]:
    """Validated ``{"steps", "scores", "metric"}`` from a JSON file."""
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    steps, scores = data.get("steps"), data.get("scores")
    if not isinstance(steps, list) or not isinstance(scores, list) or len(steps) != len(scores) \
            or not steps:
        raise ValueError(
            f"{path}: expected JSON {{\"steps\": [...], \"scores\": [...], \"metric\": ...}} "
            "with equally long, non-empty lists"
        )
    return {"steps": [int(s) for s in steps], "scores": [float(s) for s in scores],
            "metric": str(data.get("metric", "score"))}
