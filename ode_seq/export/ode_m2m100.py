"""A Hugging Face folder with custom code (``trust_remote_code=True``) for ODE Transformers with
Runge–Kutta blocks: M2M100 whose layers run ode-seq's solver core and layer field
(:mod:`.remote_code`; the files in ``CARRIED`` are copied from :mod:`ode_seq.solvers` and
:mod:`ode_seq.layers.fields`), decoder blocks with one cache per (step, stage).

Fixed-grid methods of any tableau, any steps over a weight-shared group's interval, and every
coefficient mode (fixed, learned, learned-shared, free, free-ones, ema) are carried over; a stack
of Euler steps becomes M2M100's own layers (:mod:`.plain`). Refused, naming the option: adaptive
encoders, RK-sublayer blocks, other fields, layer histories, relative positions.
"""

from __future__ import annotations

import os
import shutil
from typing import Any, Dict

from ode_seq.layers.layer_history import HistoryBlock
from ode_seq.models import ODETransformerModel
from ode_seq.solvers import FixedGridSolver, PredictorCorrectorSolver

from . import m2m100
from .plain import NotRepresentable, PlainTransformer, stack_layers, stack_sizes, transformer_config

REMOTE_CODE = os.path.join(os.path.dirname(__file__), "remote_code")
PACKAGE = os.path.dirname(os.path.dirname(__file__))
# The files of ode_seq that the remote code imports, copied unchanged into the folder.
CARRIED = tuple(
    os.path.join(PACKAGE, *path)
    for path in (
        ("solvers", "tableaus.py"),
        ("solvers", "fixed_grid.py"),
        ("solvers", "observers.py"),
        ("solvers", "coefficients.py"),
        ("layers", "fields.py"),
    )
)
AUTO_MAP = {
    "AutoConfig": "configuration_ode_m2m100.ODEM2M100Config",
    "AutoModelForSeq2SeqLM": "modeling_ode_m2m100.ODEM2M100ForConditionalGeneration",
}


def is_rk_stack(model, side: str) -> bool:
    """Whether ``side`` of an ODE Transformer takes multi-stage (or adaptive) steps."""
    return (
        isinstance(model, ODETransformerModel)
        and model.layer_kind == "standard"
        and any(
            not isinstance(b, HistoryBlock)
            and (not isinstance(b.solver, FixedGridSolver) or b.solver.tableau.stages > 1)
            for b in getattr(model, side).layers
        )
    )


def has_rk_stack(model) -> bool:
    return is_rk_stack(model, "encoder") or is_rk_stack(model, "decoder")


def stack_options(model: ODETransformerModel, side: str) -> Dict[str, Any]:
    """The config's ``{side}_ode_*`` options, after checking every block of ``side`` runs in the
    remote code."""
    blocks = list(getattr(model, side).layers)
    for block in blocks:
        if isinstance(block, HistoryBlock):
            raise NotRepresentable(f"--{side}-layer-history: the remote code has no layer history")
        if block.relative_positions:
            raise NotRepresentable(f"--{side}-relative-positions: M2M100's attention has absolute positions only")
        if isinstance(block.solver, PredictorCorrectorSolver):
            raise NotRepresentable(
                f"--{side}-ode-corrector {block.solver.form}: the remote code has no predictor-corrector steps"
            )
        if not isinstance(block.solver, FixedGridSolver):
            raise NotRepresentable(
                f"--{side}-ode-method {block.solver.method}: the remote code runs fixed-grid methods only"
            )
        if block.field_form != "residual-branch" or block.spec.scope != "block":
            raise NotRepresentable(
                f"--ode-field {block.field_form} --ode-scope {block.spec.scope}: the remote code "
                "integrates the residual-branch field of whole blocks"
            )
    solver = blocks[0].solver
    return {
        f"{side}_ode_method": solver.method,
        f"{side}_ode_steps": solver.steps,
        f"{side}_ode_interval": float(solver.interval),
    }


def rk_transformer(model: ODETransformerModel, args: Any) -> PlainTransformer:
    """The weights in fairseq's names: Runge–Kutta blocks as trained (with their ``combiner``),
    the other stack as a plain Transformer's layers."""
    arch = getattr(args, "arch", "ode_transformer")
    state = {k: v for k, v in model.state_dict().items() if ".layers." not in k}
    for side in ("encoder", "decoder"):
        if is_rk_stack(model, side):
            state.update({k: v for k, v in model.state_dict().items() if k.startswith(f"{side}.layers.")})
        else:
            state.update(stack_layers(model, side, arch))
    return PlainTransformer(state, transformer_config(args, type(model), stack_sizes(state)))


def ode_options(model: ODETransformerModel, args: Any) -> Dict[str, Any]:
    options: Dict[str, Any] = {"ode_coefficients": args.ode_coefficients}
    for side in ("encoder", "decoder"):
        if is_rk_stack(model, side):
            options.update(stack_options(model, side))
    return options


def save(model: ODETransformerModel, args: Any, src_dict, tgt_dict, spm: str | None, output: str) -> None:
    """The custom-code folder: the model and solver code, config, weights, dictionary, tokenizer."""
    from transformers.dynamic_module_utils import get_class_from_dynamic_module

    options = ode_options(model, args)
    rk = rk_transformer(model, args)
    m2m100.check_representable(rk.config, src_dict.symbols == tgt_dict.symbols)
    os.makedirs(output)
    for name in os.listdir(REMOTE_CODE):
        if name.endswith(".py") and name != "__init__.py":
            shutil.copyfile(os.path.join(REMOTE_CODE, name), os.path.join(output, name))
    for path in CARRIED:
        shutil.copyfile(path, os.path.join(output, os.path.basename(path)))
    config_class = get_class_from_dynamic_module(AUTO_MAP["AutoConfig"], output)
    model_class = get_class_from_dynamic_module(AUTO_MAP["AutoModelForSeq2SeqLM"], output)
    config = config_class(**m2m100.m2m100_options(rk), **options)
    config.auto_map = AUTO_MAP
    hf = m2m100.load_weights(model_class(config), rk)
    m2m100.save_folder(hf, tgt_dict, spm, output)
