"""A Hugging Face folder with custom code (``trust_remote_code=True``) for ODE Transformers with
Runge–Kutta blocks: M2M100 whose layers run ode-seq's solver core and layer field
(:mod:`.remote_code`, written by :mod:`.remote_folder`), decoder blocks with one cache per (step, stage).

Fixed-grid methods of any tableau, any steps over a weight-shared group's interval, every
coefficient mode (fixed, learned, learned-shared, free, free-ones, ema) and PCformer's
predictor–corrector steps (``--{side}-ode-corrector multistep`` with its history length, ``dlcl``
in the encoder; the corrector's weights are ordinary parameters) are carried over; a stack of
Euler steps without a corrector becomes M2M100's own layers (:mod:`.plain`). Refused, naming the
option: adaptive encoders, RK-sublayer blocks, other fields, layer histories, relative positions.
"""

from __future__ import annotations

from typing import Any, Dict

from ode_seq.layers.layer_history import HistoryBlock
from ode_seq.models import ODETransformerModel
from ode_seq.solvers import FixedGridSolver, PredictorCorrectorSolver

from . import m2m100
from .hf_folder import TextProcessing
from .plain import NotRepresentable, PlainTransformer, stack_layers, stack_sizes, transformer_config
from .remote_folder import corrector_options, write_code

REMOTE_FILES = ("configuration_ode_m2m100.py", "modeling_ode_m2m100.py")
AUTO_MAP = {
    "AutoConfig": "configuration_ode_m2m100.ODEM2M100Config",
    "AutoModelForSeq2SeqLM": "modeling_ode_m2m100.ODEM2M100ForConditionalGeneration",
}


def is_rk_stack(model, side: str) -> bool:
    """Whether ``side`` of an ODE Transformer takes multi-stage, adaptive or corrected steps."""
    return (
        isinstance(model, ODETransformerModel)
        and model.layer_kind == "standard"
        and any(
            not isinstance(b, HistoryBlock)
            and (
                not isinstance(b.solver, FixedGridSolver)
                or b.solver.tableau.stages > 1
                or isinstance(b.solver, PredictorCorrectorSolver)
            )
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
        **corrector_options(solver, side),
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


def save(
    model: ODETransformerModel,
    args: Any,
    src_dict,
    tgt_dict,
    spm: str | None,
    output: str,
    text: TextProcessing = TextProcessing(),
) -> None:
    """The custom-code folder: the model and solver code, config, weights, dictionary, tokenizer."""
    options = ode_options(model, args)
    rk = rk_transformer(model, args)
    m2m100.check_representable(rk.config, src_dict.symbols == tgt_dict.symbols)
    config_class, model_class = write_code(output, REMOTE_FILES, AUTO_MAP)
    config = config_class(**m2m100.m2m100_options(rk), **options)
    config.auto_map = AUTO_MAP
    hf = m2m100.load_weights(model_class(config), rk)
    m2m100.save_translation_folder(hf, rk, tgt_dict, spm, text, output)
