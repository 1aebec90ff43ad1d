"""Export a trained model outside ode-seq (docs/export.md has the table of what goes where):

- ``--to fairseq``: a fairseq ``transformer`` (``transformer_lm``) checkpoint (file) that
  fairseq-generate (fairseq-eval-lm) loads without this plugin, with safe loading on;
- ``--to ctranslate2``: a CTranslate2 model directory (CTranslate2's fairseq converter): a
  ``Translator``, or a ``Generator`` for a language model;
- ``--to hf``: a Hugging Face folder (safetensors) with the dictionary, the SentencePiece model if
  given, and a tokenizer that needs transformers only (``--tokenizer moses``,
  ``--moses-no-dash-splits``, ``--moses-no-escape`` as fairseq-interactive's), loaded by
  ``AutoTokenizer`` (``trust_remote_code=True``): ``M2M100ForConditionalGeneration`` for a
  translation model (with its ``pipeline("translation")``), ``XGLMForCausalLM`` for a language
  model (``pipeline("text-generation")``); an ODE model with Runge–Kutta blocks becomes M2M100 or
  XGLM with custom code (``trust_remote_code=True``) running ode-seq's solver core.

Exportable to fairseq and ctranslate2: Euler ODE Transformers and language models whose steps are
Transformer layers, the non-autonomous models at any step count (``--encoder-steps``/
``--decoder-steps``), ``lora_transformer`` (adapters merged) and fairseq's ``transformer`` trained
with the plugin (:mod:`ode_seq.export.plain`); to hf also Runge–Kutta blocks. Exit status: 2 for
usage errors (including paths that do not exist or cannot be written, and a ``--data`` or
``--spm`` whose dictionaries or pieces are not those the model was trained with), 1 for a model the
target cannot represent (the message names the option); nothing is left behind on either.

    python -m ode_seq.cli.export --path ckpt.pt --encoder-steps 12 --decoder-steps 12 --output plain.pt
    python -m ode_seq.cli.export --to ctranslate2 --path ckpt.pt --output ct2-model
    python -m ode_seq.cli.export --to hf --path ckpt.pt --spm spm.model --tokenizer moses --output hf-model
"""

from __future__ import annotations

import argparse
import glob
import os
import sys
from typing import Any, Dict, List, Optional, Tuple

from fairseq import checkpoint_utils
from fairseq.models import ARCH_MODEL_REGISTRY, MODEL_REGISTRY

from ode_seq.checkpoint_files import load_checkpoint, save_checkpoint, serialized_size, verify_checkpoint_file
from ode_seq.export import PlainTransformer, m2m100, ode_m2m100, ode_xglm, plain_transformer
from ode_seq.export.hf_folder import TOKENIZERS, TextProcessing
from ode_seq.fairseq_fixes import apply_fixes
from ode_seq.models import ODETransformerLanguageModel
from ode_seq.models.architectures import architecture_layer_kind
from ode_seq.output_files import (
    check_output_directory,
    check_output_file,
    explaining_full_disk,
    same_file,
    stopping_cleanly,
    work_directory,
)
from ode_seq.training_data.model_options import class_options
from ode_seq.training_data.record import MODEL_OPTIONS_KEY, DataMismatchError
from ode_seq.training_data.subword_models import check_subword_model, sentencepiece_file

TARGETS = ("fairseq", "ctranslate2", "hf")
WORK_PREFIX = ".export-"  # the work directories beside --output


def parse_args(argv: Optional[List[str]], prog: str = "python -m ode_seq.cli.export") -> argparse.Namespace:
    p = argparse.ArgumentParser(prog=prog, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--to", choices=TARGETS, default="fairseq", help="format to write (default: fairseq)")
    p.add_argument("--path", required=True, help="checkpoint to export")
    p.add_argument(
        "--output", required=True, help="--to fairseq: the checkpoint file to write; otherwise a new directory"
    )
    p.add_argument(
        "--encoder-steps", type=int, help="Euler steps (layers) of a non-autonomous encoder (default: trained)"
    )
    p.add_argument(
        "--decoder-steps", type=int, help="Euler steps (layers) of a non-autonomous decoder (default: trained)"
    )
    p.add_argument("--data", help="data directory with the dictionaries (default: the one the model was trained on)")
    p.add_argument("--spm", help="--to hf: the SentencePiece model of the corpus, copied into the folder")
    p.add_argument(
        "--tokenizer",
        choices=TOKENIZERS,
        help="--to hf: the folder's tokenizer (de)tokenises as fairseq-interactive --tokenizer does "
        "(moses: the task's --source-lang/--target-lang, en for a language model)",
    )
    for option, what in (("--moses-no-dash-splits", "dash splits"), ("--moses-no-escape", "XML escapes")):
        p.add_argument(option, action="store_true", help=f"--tokenizer moses without {what}, as fairseq's option")
    args = p.parse_args(argv)
    for side in ("encoder", "decoder"):
        steps = getattr(args, f"{side}_steps")
        if steps is not None and steps < 1:
            p.error(f"--{side}-steps must be a positive number of steps (layers), got {steps}")
    for option, value in (("--spm", args.spm), ("--tokenizer", args.tokenizer)):
        if value is not None and args.to != "hf":
            p.error(f"{option} is for --to hf (the folder's tokenizer); --to {args.to} does not tokenize")
    for option, value in (
        ("--moses-no-dash-splits", args.moses_no_dash_splits),
        ("--moses-no-escape", args.moses_no_escape),
    ):
        if value and args.tokenizer != "moses":
            p.error(f"{option} is an option of --tokenizer moses; add --tokenizer moses (with --to hf)")
    return args


def check_paths(args: argparse.Namespace) -> None:
    """ValueError for a missing input or an output that cannot be written, before any work."""
    for option, path in (("--path", args.path), ("--spm", args.spm), ("--data", args.data)):
        if path is not None and not os.path.exists(path):
            raise ValueError(f"{option} {path} does not exist")
    if same_file(args.path, args.output):
        raise ValueError(f"--output {args.output} is the checkpoint to export; write to another file")
    if args.to == "fairseq":
        check_output_file(args.output, "--output")
    else:
        check_output_directory(args.output, "--output")
        if os.path.exists(args.output) and os.listdir(args.output):
            raise ValueError(f"--output {args.output} exists and is not empty; name a new directory")
    verify_checkpoint_file(args.path)
    data = args.data or load_checkpoint(args.path)["cfg"]["task"]["data"]
    if not os.path.isfile(os.path.join(data, "dict.txt")) and not glob.glob(os.path.join(data, "dict.*.txt")):
        raise ValueError(
            f"the model's data directory {data} holds no dictionary (dict.*.txt): pass --data with "
            "the data directory the model was trained on"
        )


def load_model(args: argparse.Namespace):
    """(the model in eval mode, fairseq's model options, fairseq's task)."""
    overrides: Dict[str, Any] = {
        f"{side}_ode_steps": getattr(args, f"{side}_steps")
        for side in ("encoder", "decoder")
        if getattr(args, f"{side}_steps")
    }
    if args.data is not None:
        overrides["data"] = args.data
    if args.encoder_steps or args.decoder_steps or args.to != "fairseq":
        check_options_fit_model(args, *checkpoint_model(args.path))
    (model,), cfg, task = checkpoint_utils.load_model_ensemble_and_task([args.path], arg_overrides=overrides)
    return model.eval(), cfg.model, task


def checkpoint_model(path: str) -> Tuple[Optional[type], Optional[str]]:
    """The registered model class of the checkpoint's architecture (None if not registered) and
    its layer kind (None if not an ODE model)."""
    model_cfg = load_checkpoint(path)["cfg"]["model"]
    arch = getattr(model_cfg, "arch", None) or getattr(model_cfg, "_name", None)
    return ARCH_MODEL_REGISTRY.get(arch), architecture_layer_kind(model_cfg)


def check_options_fit_model(args: argparse.Namespace, model_class: Optional[type], layer_kind: Optional[str]) -> None:
    """Step counts for non-autonomous models (layer kind time-dependent) only; a language model
    has no encoder."""
    model_class = model_class or object
    non_autonomous = layer_kind == "time-dependent"
    if issubclass(model_class, ODETransformerLanguageModel):
        if args.encoder_steps:
            raise ValueError("--encoder-steps: a language model has no encoder; pass --decoder-steps")
        if args.decoder_steps and not non_autonomous:
            raise ValueError(
                "--decoder-steps applies to language models of the time-dependent layer kind "
                "(ode_transformer_lm_nonauto, or --layer-kind time-dependent)"
            )
    elif (args.encoder_steps or args.decoder_steps) and not non_autonomous:
        raise ValueError(
            "--encoder-steps and --decoder-steps apply to models of the time-dependent layer kind "
            "(ode_transformer_nonauto, or --layer-kind time-dependent)"
        )


def fairseq_state(args: argparse.Namespace, plain: PlainTransformer) -> Dict[str, Any]:
    """The checkpoint of ``plain``: no plugin, no optimizer state, the training state kept, the
    record of its training data kept and that of its options those of the exported model."""
    state = load_checkpoint(args.path)
    state["model"] = plain.state_dict
    state["cfg"]["model"] = plain.config
    state["cfg"]["common"]["user_dir"] = None
    if args.data is not None:
        state["cfg"]["task"]["data"] = args.data
    state["args"] = None
    state["last_optimizer_state"] = None
    plain_class = MODEL_REGISTRY[plain.config["_name"]]
    options = class_options(plain_class, argparse.Namespace(**plain.config))
    state["task_state"] = {**(state.get("task_state") or {}), MODEL_OPTIONS_KEY: options}
    return state


def task_option(task, name: str) -> Any:
    """Option ``name`` of fairseq's task (a dataclass task's ``cfg``, a legacy task's ``args``)."""
    return getattr(task.cfg if task.cfg is not None else task.args, name, None)


def text_processing(args: argparse.Namespace, task) -> TextProcessing:
    """fairseq-interactive's --tokenizer and its Moses options, with the task's languages (fairseq's
    default en without)."""
    languages = {side: task_option(task, side) or "en" for side in ("source_lang", "target_lang")}
    moses = {name: getattr(args, name) for name in ("moses_no_dash_splits", "moses_no_escape")}
    return TextProcessing(args.tokenizer, **languages, **moses)


def write_directory(args: argparse.Namespace, model, options, task) -> PlainTransformer:
    """Write the --to ctranslate2 / hf directory in a work directory beside it (held by this process,
    removed when it ends, or by the next export if it was killed), renamed when complete."""
    parent = os.path.dirname(os.path.abspath(args.output))
    os.makedirs(parent, exist_ok=True)
    with work_directory(parent, WORK_PREFIX) as work:
        staged = os.path.join(work, "out")
        dictionaries = (task.source_dictionary, task.target_dictionary, args.spm, staged, text_processing(args, task))
        if args.to == "hf" and isinstance(model, ODETransformerLanguageModel):
            plain = ode_xglm.save(model, options, *dictionaries[1:])  # one dictionary
        elif args.to == "hf" and ode_m2m100.has_rk_stack(model):
            ode_m2m100.save(model, options, *dictionaries)
            plain = ode_m2m100.rk_transformer(model, options)
        else:
            plain = plain_transformer(model, options)
            if args.to == "ctranslate2":
                from ode_seq.export import ctranslate2

                ctranslate2.convert(plain, fairseq_state(args, plain), task_option(task, "data"), work, staged)
            else:
                m2m100.save(plain, *dictionaries)
        if os.path.isdir(args.output):
            os.rmdir(args.output)
        os.replace(staged, args.output)
    return plain


def export(args: argparse.Namespace) -> PlainTransformer:
    """Load the model and write it as ``args`` say; returns the weights exported, in fairseq's names."""
    model, options, task = load_model(args)
    if args.spm is not None:
        check_subword_model(sentencepiece_file(f"--spm {args.spm}", args.spm), task)
    if args.to == "fairseq":
        plain = plain_transformer(model, options)
        save_checkpoint(fairseq_state(args, plain), args.output)
        return plain
    with explaining_full_disk(args.output, lambda: serialized_size(model.state_dict())):
        return write_directory(args, model, options, task)


def main(argv: Optional[List[str]] = None, prog: str = "python -m ode_seq.cli.export") -> int:
    args = parse_args(argv, prog)
    apply_fixes()
    try:
        check_paths(args)
    except ValueError as error:  # the command line names something that is not there
        print(f"export: error: {error}", file=sys.stderr)
        return 2
    try:
        with stopping_cleanly():  # a SIGTERM leaves no temporary file or work directory behind
            plain = export(args)
    except DataMismatchError as error:  # --data or --spm is not what the model was trained with
        print(f"export: error: {error}", file=sys.stderr)
        return 2
    except ValueError as error:
        print(f"export: error: {error}", file=sys.stderr)
        return 1
    encoder, decoder = plain.layers
    stacks = f"{encoder} encoder and {decoder} decoder layers" if encoder else f"{decoder} decoder layers"
    print(f"exported {stacks} to {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
