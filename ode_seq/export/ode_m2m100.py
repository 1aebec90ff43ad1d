"""A Hugging Face folder with custom code (``trust_remote_code=True``) for ODE Transformers with
Runge–Kutta encoder blocks and a plain decoder: M2M100 whose encoder layers run ode-seq's solver
core (:mod:`.remote_code`; the solver files are copied from :mod:`ode_seq.solvers`).

Fixed-grid methods of any tableau, any steps over a weight-shared group's interval, and every
coefficient mode (fixed, learned, learned-shared, free, free-ones, ema) are carried over; the
decoder must be a plain Transformer (:mod:`.plain`). Refused, naming the option: adaptive
encoders, RK-sublayer encoders, other fields, layer histories, relative positions, RK decoders
(their per-stage caches are not M2M100's cache).
"""
from __future__ import annotations

import os
import shutil
from typing import Any, Dict

from ode_seq.layers.layer_history import HistoryBlock
from ode_seq.models import ODETransformerModel
from ode_seq.solvers import FixedGridSolver

from . import m2m100
from .plain import NotRepresentable, PlainTransformer, stack_layers, transformer_config

REMOTE_CODE = os.path.join(os.path.dirname(__file__), "remote_code")
SOLVERS = os.path.join(os.path.dirname(os.path.dirname(__file__)), "solvers")
SOLVER_CORE = ("tableaus.py", "fixed_grid.py", "observers.py", "coefficients.py")
AUTO_MAP = {
    "AutoConfig": "configuration_ode_m2m100.ODEM2M100Config",
    "AutoModelForSeq2SeqLM": "modeling_ode_m2m100.ODEM2M100ForConditionalGeneration",
}


def has_rk_encoder(model) -> bool:
    """Whether ``model`` is an ODE Transformer whose encoder takes multi-stage steps."""
    return isinstance(model, ODETransformerModel) and model.layer_kind == "standard" and any(
        not isinstance(b, HistoryBlock) and (not isinstance(b.solver, FixedGridSolver) or b.solver.tableau.stages > 1)
        for b in model.encoder.layers
    )


def encoder_options(model: ODETransformerModel, args: Any) -> Dict[str, Any]:
    """The ODE options of the config, after checking every encoder block runs in the remote code."""
    blocks = list(model.encoder.layers)
    for block in blocks:
        if isinstance(block, HistoryBlock):
            raise NotRepresentable("--encoder-layer-history: the remote code has no layer history")
        if block.relative_positions:
            raise NotRepresentable("--encoder-relative-positions: M2M100's attention has absolute positions only")
        if not isinstance(block.solver, FixedGridSolver):
            raise NotRepresentable(
                f"--encoder-ode-method {block.solver.method}: the remote code runs fixed-grid methods only"
            )
        if block.field_form != "residual-branch" or block.spec.scope != "block":
            raise NotRepresentable(
                f"--ode-field {block.field_form} --ode-scope {block.spec.scope}: the remote code "
                "integrates the residual-branch field of whole blocks"
            )
    solver = blocks[0].solver
    return dict(encoder_ode_method=solver.method, encoder_ode_steps=solver.steps,
                encoder_ode_interval=float(solver.interval), ode_coefficients=args.ode_coefficients)


def rk_transformer(model: ODETransformerModel, args: Any) -> PlainTransformer:
    """The weights in fairseq's names: RK encoder blocks as trained (with their ``combiner``),
    the decoder as a plain Transformer's layers."""
    arch = getattr(args, "arch", "ode_transformer")
    state = {k: v for k, v in model.state_dict().items() if ".layers." not in k or k.startswith("encoder.")}
    state.update(stack_layers(model, "decoder", arch))
    layers = (len(model.encoder.layers), sum(k.endswith(".fc1.weight") for k in state if k.startswith("decoder.")))
    return PlainTransformer(state, transformer_config(args, type(model), layers))


def save(model: ODETransformerModel, args: Any, src_dict, tgt_dict, spm: str | None, output: str) -> None:
    """The custom-code folder: the model and solver code, config, weights, dictionary, tokenizer."""
    from transformers.dynamic_module_utils import get_class_from_dynamic_module

    options = encoder_options(model, args)
    rk = rk_transformer(model, args)
    m2m100.check_representable(rk.config, src_dict.symbols == tgt_dict.symbols)
    os.makedirs(output)
    for name in os.listdir(REMOTE_CODE):
        if name.endswith(".py") and name != "__init__.py":
            shutil.copyfile(os.path.join(REMOTE_CODE, name), os.path.join(output, name))
    for name in SOLVER_CORE:
        shutil.copyfile(os.path.join(SOLVERS, name), os.path.join(output, name))
    config_class = get_class_from_dynamic_module(AUTO_MAP["AutoConfig"], output)
    model_class = get_class_from_dynamic_module(AUTO_MAP["AutoModelForSeq2SeqLM"], output)
    config = config_class(**m2m100.m2m100_options(rk), **options)
    config.auto_map = AUTO_MAP
    hf = m2m100.load_weights(model_class(config), rk)
    m2m100.save_folder(hf, tgt_dict, spm, output)
