"""Which trained models are plain pre-norm Transformers, and their fairseq ``transformer`` (or, for a
language model, ``transformer_lm``) weights.

- An Euler block of the residual-branch field with step size h = 1 is the pre-norm layer:
  y + F(y) = y + a + f(y + a). A block over [0, k] taken in N = k steps (a weight-shared group)
  is its layer applied k times. With the sublayer scope (RK-sublayer) Euler updates the sublayers
  one after the other, y ← y + h·a(y), y ← y + h·f(y): the pre-norm layer whose output
  projections (self-attention, cross-attention, fc2) are scaled by h, at any h.
- A non-autonomous block (weights θ(τ)) advances its inner stream by h (``stream_scale``), so
  step n is the pre-norm layer with weights θ(τ_n) and output projections scaled by h
  (:mod:`ode_seq.layers.time_dependent`), at any step count.
- ``lora_transformer``: adapters merged, W ← W + (α/r)·B A (:mod:`ode_seq.models.lora`).
- fairseq's own ``transformer`` trained with the plugin: its weights as they are.
- The ODE language models (``ode_transformer_lm*``): their decoder as above, written as a
  pre-norm fairseq ``transformer_lm``.

Anything else (several stages, learned coefficients, another field, a layer history, relative
positions, adaptive solvers, stable layers) is refused by :class:`NotRepresentable`, naming the
option that prevents it.
"""

from __future__ import annotations

import argparse
import typing
from dataclasses import dataclass, fields
from typing import Any, Dict, Iterator, Optional, Tuple

import torch
from fairseq.models.transformer import TransformerModel
from fairseq.models.transformer_lm import TransformerLanguageModelConfig
from torch import Tensor, nn

from ode_seq.layers.blocks import ODEBlock
from ode_seq.layers.layer_history import HistoryBlock
from ode_seq.models import LoRATransformerModel, ODETransformerLanguageModel, ODETransformerModel
from ode_seq.models.lora import merge_adapters
from ode_seq.models.ode_transformer import ODEModel
from ode_seq.solvers import FixedGridSolver, PredictorCorrectorSolver

SCALED_BY_STEP = ("self_attn.out_proj.", "encoder_attn.out_proj.", "fc2.")
PLAIN_KINDS = ("standard", "time-dependent")


class NotRepresentable(ValueError):
    """A model the target format cannot hold; the message names the option that prevents it."""


@dataclass
class PlainTransformer:
    """A fairseq ``transformer`` or ``transformer_lm``: its state dict and its model options (a
    plain dict of fairseq's options of that model and its ``_name``; a language model has no
    encoder layers)."""

    state_dict: Dict[str, Tensor]
    config: Dict[str, Any]

    @property
    def layers(self) -> Tuple[int, int]:
        return self.config.get("encoder_layers", 0), self.config["decoder_layers"]


def _check_block(block: nn.Module, side: str, arch: str) -> ODEBlock:
    if isinstance(block, HistoryBlock):
        raise NotRepresentable(
            f"the {arch} model's {side} has a layer history (--{side}-layer-history): each block "
            "reads a learned mix of all earlier outputs, which a Transformer layer does not"
        )
    if block.relative_positions:
        raise NotRepresentable(
            f"the {arch} model uses relative positions (--{side}-relative-positions "
            f"{block.relative_positions}): fairseq's transformer, CTranslate2's and M2M100's "
            "self-attention have absolute positions only"
        )
    solver = block.solver
    if isinstance(solver, PredictorCorrectorSolver):
        raise NotRepresentable(
            f"the {arch} model's {side} corrects every step (--{side}-ode-corrector {solver.form}): "
            "a Transformer layer has no corrector evaluation or history: keep the ODE model"
        )
    if not isinstance(solver, FixedGridSolver) or solver.tableau.stages != 1:
        raise NotRepresentable(
            f"the {arch} model's {side} integrates with {solver.method} (--{side}-ode-method): only "
            "Euler steps are Transformer layers; multi-stage methods and their coefficients "
            "(--ode-coefficients) have no plain equivalent: keep the ODE model"
        )
    if block.field_form != "residual-branch":
        raise NotRepresentable(
            f"the {arch} model uses --ode-field {block.field_form}: only Euler steps of the "
            "residual-branch field are pre-norm Transformer layers"
        )
    h = solver.step_size
    if h != 1.0 and block.spec.scope != "sublayer" and block.stream_scale != h:
        raise NotRepresentable(
            f"the {arch} model's {side} takes Euler steps of size {h:g} (--{side}-ode-steps "
            f"{solver.steps} over --{side}-share-group-size {solver.interval:g}); with --ode-scope "
            "block only step size 1 is a Transformer layer: export with --model-overrides "
            f"\"{{'{side}_ode_steps': {int(solver.interval)}}}\" or train with --ode-scope sublayer"
        )
    return block


def _step_weights(block: ODEBlock, step: int) -> Iterator[Tuple[str, Tensor]]:
    """The weights of the Transformer layer equal to Euler step ``step`` of ``block``."""
    solver = block.solver
    h = solver.step_size
    if hasattr(block, "weights_at"):
        weights = block.weights_at(solver.stage_time(step, 0) / solver.interval)
    else:
        weights = {k: v for k, v in block.state_dict().items() if not k.startswith("combiner.")}
    for name, value in weights.items():
        scale = h if name.startswith(SCALED_BY_STEP) else 1.0
        yield name, (value * scale).detach().clone()


def check_layer_kind(model: ODEModel, arch: str) -> None:
    if model.layer_kind not in PLAIN_KINDS:
        raise NotRepresentable(f"the {arch} model has {model.layer_kind} layers, which are not Transformer layers")


def stack_layers(model: ODEModel, side: str, arch: str) -> Dict[str, Tensor]:
    """``{side}.layers.*`` of the equivalent fairseq ``transformer``: one layer per Euler step."""
    state: Dict[str, Tensor] = {}
    layer = 0
    with torch.no_grad():
        for block in getattr(model, side).layers:
            block = _check_block(block, side, arch)
            for step in range(block.solver.steps):
                for name, value in _step_weights(block, step):
                    state[f"{side}.layers.{layer}.{name}"] = value
                layer += 1
    return state


def discrete_state_dict(model: ODEModel, arch: str = "ode_transformer") -> Dict[str, Tensor]:
    """The state dict of the equivalent fairseq ``transformer`` (``transformer_lm``): one layer per
    Euler step."""
    check_layer_kind(model, arch)
    state = {k: v for k, v in model.state_dict().items() if ".layers." not in k}
    for side in model.stacks:
        state.update(stack_layers(model, side, arch))
    return state


def stack_sizes(state: Dict[str, Tensor]) -> Tuple[int, int]:
    """The number of encoder and decoder layers (blocks) in fairseq's state dict ``state``."""
    return tuple(  # type: ignore[return-value]
        len({k.split(".")[2] for k in state if k.startswith(f"{side}.layers.")}) for side in ("encoder", "decoder")
    )


def _extra_option_names(model_class: type) -> set:
    """The options ``model_class`` adds to fairseq's Transformer (dest names)."""
    ours, fairseqs = argparse.ArgumentParser(), argparse.ArgumentParser()
    model_class.add_args(ours)
    TransformerModel.add_args(fairseqs)
    return {a.dest for a in ours._actions} - {a.dest for a in fairseqs._actions}


def transformer_config(args: Any, model_class: type, layers: Tuple[int, int]) -> Dict[str, Any]:
    """fairseq's model options ``args`` without ``model_class``'s own, as a ``transformer``."""
    extra = _extra_option_names(model_class)
    config = {k: v for k, v in vars(args).items() if k not in extra}
    config.update(_name="transformer", arch="transformer", encoder_layers=layers[0], decoder_layers=layers[1])
    return config


def transformer_lm_config(args: Any, layers: int) -> Dict[str, Any]:
    """fairseq's options of ``transformer_lm`` in ``args`` (the rest left out), with ``layers``.
    A bool where the option is an integer becomes 0/1: fairseq's ``base_lm_architecture`` sets
    ``base_shuffle = False``, which its own dataclass (``Optional[int]``) refuses on loading."""
    types = typing.get_type_hints(TransformerLanguageModelConfig)
    config = {}
    for f in fields(TransformerLanguageModelConfig):
        if hasattr(args, f.name):
            value = getattr(args, f.name)
            integer = types[f.name] in (int, Optional[int])
            config[f.name] = int(value) if integer and isinstance(value, bool) else value
    config.update(_name="transformer_lm", decoder_layers=layers)
    return config


def plain_transformer(model: nn.Module, args: Any) -> PlainTransformer:
    """The fairseq ``transformer`` (``transformer_lm`` for a language model) equal to ``model``
    (in eval mode), built from fairseq's model options ``args``; NotRepresentable when there is
    none."""
    arch = getattr(args, "arch", type(model).__name__)
    if isinstance(model, ODETransformerLanguageModel):
        state = discrete_state_dict(model, arch)
        return PlainTransformer(state, transformer_lm_config(args, stack_sizes(state)[1]))
    if isinstance(model, ODETransformerModel):
        state = discrete_state_dict(model, arch)
    elif isinstance(model, LoRATransformerModel):
        state = merge_adapters(model).state_dict()
    elif type(model) is TransformerModel:
        state = model.state_dict()
    else:
        raise NotRepresentable(
            f"the {arch} model ({type(model).__name__}) is not a Transformer nor an ODE model "
            "with Euler steps: nothing to export it to"
        )
    return PlainTransformer(state, transformer_config(args, type(model), stack_sizes(state)))
