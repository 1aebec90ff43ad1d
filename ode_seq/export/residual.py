"""A trained ODE model's layers as the residual model of the same layers: train with an ODE block,
serve at residual cost.

Every block keeps its layer's parameters and takes Euler steps, y ← y + h·F(y): one layer evaluation
per step instead of s (an s-stage method) or s + 1 (a predictor–corrector). What only a multi-stage
method has is dropped: learned stage coefficients (RK2's gate, ``combiner.*``), PCformer's EMA weight
and corrector weights. The result computes another function than the ODE model: it is the start of a
fine-tune (``fairseq-train --finetune-from-model``) or a distillation, not a model to serve as it is.
"""

from __future__ import annotations

import argparse
import copy
from typing import Any, Callable, Dict, List, Tuple

from torch import nn

from ode_seq.models.config import SIDES

# What a residual stack of the same layers has: Euler steps, no corrector, no stage weights.
RESIDUAL_OPTIONS = {"ode_coefficients": "fixed", **{f"{side}_ode_corrector": "none" for side in SIDES}}


def residual_options(model_options: argparse.Namespace) -> argparse.Namespace:
    """``model_options`` (fairseq's model options of an ODE model) with every stack's method Euler."""
    options = copy.copy(model_options)
    for side in SIDES:
        if hasattr(options, f"{side}_ode_method"):
            setattr(options, f"{side}_ode_method", "euler")
    for name, value in RESIDUAL_OPTIONS.items():
        if hasattr(options, name):
            setattr(options, name, value)
    return options


def residual_state(
    state: Dict[str, Any], build: Callable[[argparse.Namespace], nn.Module]
) -> Tuple[Dict[str, Any], List[str], nn.Module]:
    """The checkpoint ``state`` as the residual model of its layers (``build`` makes a model from
    model options), the parameters dropped, and the residual model built. The optimizer state is
    left out (``fairseq-train --finetune-from-model`` starts from the weights alone), the training
    state kept. ValueError when the residual model needs a parameter that ``state`` lacks or holds
    in another shape (a model that is not made of the same layers)."""
    options = residual_options(state["cfg"]["model"])
    model = build(options)
    wanted, held = model.state_dict(), state["model"]
    for name, value in wanted.items():
        if name not in held or held[name].shape != value.shape:
            raise ValueError(
                f"the residual model of these layers needs {name} {tuple(value.shape)}, which the checkpoint "
                f"{'lacks' if name not in held else f'holds as {tuple(held[name].shape)}'}: only a model whose "
                "blocks are layers of the residual-branch field has a residual model of the same layers"
            )
    dropped = sorted(set(held) - set(wanted))
    new = {**state, "model": {name: held[name] for name in wanted}, "last_optimizer_state": None}
    new["cfg"] = {**state["cfg"], "model": options}
    return new, dropped, model
