"""A Hugging Face folder with custom code (``trust_remote_code=True``) for the ODE language models
that are not plain Transformers: XGLM whose layers run ode-seq's solver core and layer field
(:mod:`.remote_code`, written by :mod:`.remote_folder`), one self-attention cache per (block,
step, stage); ``AutoModelForCausalLM`` loads it.

Carried over: fixed-grid methods of any tableau (Runge–Kutta, and Euler at any step size), any
steps over a weight-shared group's interval, every coefficient mode (fixed, learned,
learned-shared, free, free-ones, ema), the three field forms (residual-branch, parallel-branch,
whole-layer) of pre-norm layers and PCformer's predictor–corrector steps
(``--decoder-ode-corrector multistep``, one cache per evaluation, the corrector's included).
Refused, naming the option: RK-sublayer blocks (``--ode-scope sublayer``) with several stages,
layer histories, relative positions, the non-autonomous and stable layer kinds, and whatever XGLM
itself lacks (:mod:`.xglm`).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Dict

from ode_seq.layers.blocks import ODEBlock
from ode_seq.layers.layer_history import HistoryBlock
from ode_seq.models import ODETransformerLanguageModel

from . import xglm
from .hf_folder import TextProcessing, save_folder
from .plain import NotRepresentable, PlainTransformer, plain_transformer, stack_sizes, transformer_lm_config
from .remote_folder import corrector_options, write_code

REMOTE_FILES = ("configuration_ode_xglm.py", "modeling_ode_xglm.py")
AUTO_MAP = {
    "AutoConfig": "configuration_ode_xglm.ODEXGLMConfig",
    "AutoModelForCausalLM": "modeling_ode_xglm.ODEXGLMForCausalLM",
}
ALTERNATIVE = "export --to fairseq where the model is a Transformer, or keep the fairseq checkpoint"


def _check_block(block: Any) -> ODEBlock:
    if isinstance(block, HistoryBlock):
        raise NotRepresentable(f"--decoder-layer-history: the remote code has no layer history; {ALTERNATIVE}")
    if block.relative_positions:
        raise NotRepresentable(
            f"--decoder-relative-positions {block.relative_positions}: XGLM's attention has absolute "
            f"positions only; {ALTERNATIVE}"
        )
    if block.spec.scope != "block":
        raise NotRepresentable(
            f"--ode-scope sublayer with --decoder-ode-method {block.solver.method}: the remote code "
            "integrates whole blocks (Euler RK-sublayer models export as plain XGLM)"
        )
    return block


def ode_options(model: ODETransformerLanguageModel, args: Any) -> Dict[str, Any]:
    """The config's ODE options, after checking that every block runs in the remote code
    (one solver setting and field form for the whole stack)."""
    arch = getattr(args, "arch", "ode_transformer_lm")
    if model.layer_kind != "standard":
        raise NotRepresentable(
            f"the {arch} model has {model.layer_kind} layers: the remote code runs standard layers; "
            "a non-autonomous model with Euler steps exports as plain XGLM at any --decoder-steps"
        )
    settings = set()
    for block in model.decoder.layers:
        block = _check_block(block)
        solver = block.solver
        corrector = tuple(sorted(corrector_options(solver, "decoder").items()))
        settings.add((solver.method, solver.steps, float(solver.interval), block.field_form, corrector))
    if len(settings) != 1:
        raise NotRepresentable(f"the {arch} model's blocks integrate differently ({sorted(settings)}): XGLM has one")
    method, steps, interval, field_form, corrector = settings.pop()
    return dict(
        decoder_ode_method=method,
        decoder_ode_steps=steps,
        decoder_ode_interval=interval,
        ode_coefficients=args.ode_coefficients,
        ode_field=field_form,
        **dict(corrector),
    )


def ode_language_model(model: ODETransformerLanguageModel, args: Any) -> PlainTransformer:
    """The weights in fairseq's names, blocks as trained (with their ``combiner``), and fairseq's
    ``transformer_lm`` options."""
    state = model.state_dict()
    return PlainTransformer(state, transformer_lm_config(args, stack_sizes(state)[1]))


def build(model: ODETransformerLanguageModel, args: Any, dictionary, output: str):
    """The ODE XGLM of ``model`` in eval mode, its code written into the new folder ``output``."""
    options = ode_options(model, args)
    lm = ode_language_model(model, args)
    xglm.check_representable(lm.config, ALTERNATIVE)
    xglm.check_dictionary(dictionary)
    config_class, model_class = write_code(output, REMOTE_FILES, AUTO_MAP)
    config = config_class(**xglm.xglm_options(lm), **options)
    config.auto_map = AUTO_MAP
    return xglm.load_weights(model_class(config), lm)


def save(
    model: ODETransformerLanguageModel,
    args: Any,
    dictionary,
    spm: str | None,
    output: str,
    text: TextProcessing = TextProcessing(),
) -> PlainTransformer:
    """The Hugging Face folder of an ODE language model: XGLM where it is a plain pre-norm
    Transformer (:func:`.plain.plain_transformer`), else XGLM with the custom code; the generation
    config is fairseq-generate's defaults. Returns the weights exported, in fairseq's names."""
    try:
        lm = plain_transformer(model, args)
    except NotRepresentable:  # not a Transformer: the custom code, or refused naming what prevents it
        lm, hf = ode_language_model(model, args), build(model, args, dictionary, output)
    else:
        hf = xglm.build(lm, dictionary)
    add_bos_token = bool(getattr(args, "add_bos_token", False))
    positions = lm.config["max_target_positions"]
    start = dictionary.bos() if add_bos_token else dictionary.eos()
    text = replace(text, prompt_start=start, max_positions=positions)
    save_folder(hf, xglm.generation_config(positions, add_bos_token), dictionary, spm, text, output)
    return lm
