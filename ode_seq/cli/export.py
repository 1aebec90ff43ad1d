"""Export a trained model that is a plain pre-norm Transformer outside ode-seq
(docs/export.md has the table of what goes where):

- ``--to fairseq``: a fairseq ``transformer`` checkpoint (file) that fairseq-generate loads without
  this plugin, with safe loading on;
- ``--to ctranslate2``: a CTranslate2 model directory (CTranslate2's fairseq converter);
- ``--to hf``: a Hugging Face ``M2M100ForConditionalGeneration`` folder (safetensors) with the
  dictionary, the SentencePiece model if given, and a tokenizer that needs transformers only; an
  ODE Transformer with Runge–Kutta blocks becomes an M2M100 with custom code
  (``trust_remote_code=True``) running ode-seq's solver core.

Exportable: Euler ODE Transformers whose steps are Transformer layers, the non-autonomous model at
any step count (``--encoder-steps``/``--decoder-steps``), ``lora_transformer`` (adapters merged) and
fairseq's ``transformer`` trained with the plugin (:mod:`ode_seq.export.plain`); the same ODE
language models ``--to fairseq`` as a plain ``transformer_lm`` (``--decoder-steps`` for
``ode_transformer_lm_nonauto``). Exit status: 2 for usage errors (including paths that do not exist
or cannot be written, and a ``--data`` or ``--spm`` whose dictionaries or pieces are not those the
model was trained with), 1 for a model the target
cannot represent (the message names the option).

    python -m ode_seq.cli.export --path ckpt.pt --encoder-steps 12 --decoder-steps 12 --output plain.pt
    python -m ode_seq.cli.export --to ctranslate2 --path ckpt.pt --output ct2-model
    python -m ode_seq.cli.export --to hf --path ckpt.pt --spm spm.model --output hf-model
"""

from __future__ import annotations

import argparse
import glob
import os
import shutil
import sys
import tempfile
from typing import Any, Dict, List, Optional

from fairseq import checkpoint_utils
from fairseq.models import ARCH_MODEL_REGISTRY

from ode_seq.checkpoint_files import load_checkpoint, save_checkpoint, serialized_size, verify_checkpoint_file
from ode_seq.export import PlainTransformer, m2m100, ode_m2m100, plain_transformer
from ode_seq.fairseq_fixes import apply_fixes
from ode_seq.models import (
    NonAutonomousODETransformerLanguageModel,
    NonAutonomousODETransformerModel,
    ODETransformerLanguageModel,
)
from ode_seq.output_files import check_output_directory, check_output_file, explaining_full_disk, same_file
from ode_seq.training_data.record import DataMismatchError
from ode_seq.training_data.subword_models import check_subword_model, sentencepiece_file

TARGETS = ("fairseq", "ctranslate2", "hf")


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
    args = p.parse_args(argv)
    for side in ("encoder", "decoder"):
        steps = getattr(args, f"{side}_steps")
        if steps is not None and steps < 1:
            p.error(f"--{side}-steps must be a positive number of steps (layers), got {steps}")
    if args.spm is not None and args.to != "hf":
        p.error(f"--spm is for --to hf (the folder's tokenizer); --to {args.to} does not tokenize")
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
        check_options_fit_model(args, checkpoint_model_class(args.path))
    (model,), cfg, task = checkpoint_utils.load_model_ensemble_and_task([args.path], arg_overrides=overrides)
    return model.eval(), cfg.model, task


def checkpoint_model_class(path: str) -> Optional[type]:
    """The registered model class of the checkpoint's architecture (None if not registered)."""
    model_cfg = load_checkpoint(path)["cfg"]["model"]
    arch = getattr(model_cfg, "arch", None) or getattr(model_cfg, "_name", None)
    return ARCH_MODEL_REGISTRY.get(arch)


def check_options_fit_model(args: argparse.Namespace, model_class: Optional[type]) -> None:
    """Step counts for non-autonomous models only; a language model goes --to fairseq (a
    transformer_lm) and has no encoder."""
    model_class = model_class or object
    if issubclass(model_class, ODETransformerLanguageModel):
        if args.to != "fairseq":
            raise ValueError(
                f"--to {args.to} exports translation models; a language model exports --to fairseq "
                "(a plain transformer_lm checkpoint)"
            )
        if args.encoder_steps:
            raise ValueError("--encoder-steps: a language model has no encoder; pass --decoder-steps")
        if args.decoder_steps and not issubclass(model_class, NonAutonomousODETransformerLanguageModel):
            raise ValueError("--decoder-steps applies to ode_transformer_lm_nonauto language models")
    elif (args.encoder_steps or args.decoder_steps) and not issubclass(model_class, NonAutonomousODETransformerModel):
        raise ValueError("--encoder-steps and --decoder-steps apply to ode_transformer_nonauto models")


def fairseq_state(args: argparse.Namespace, plain: PlainTransformer) -> Dict[str, Any]:
    """The checkpoint of ``plain``: no plugin, no optimizer state, the training state kept."""
    state = load_checkpoint(args.path)
    state["model"] = plain.state_dict
    state["cfg"]["model"] = plain.config
    state["cfg"]["common"]["user_dir"] = None
    if args.data is not None:
        state["cfg"]["task"]["data"] = args.data
    state["args"] = None
    state["last_optimizer_state"] = None
    return state


def write_directory(args: argparse.Namespace, model, options, task) -> PlainTransformer:
    """Write the --to ctranslate2 / hf directory under a temporary name, renamed when complete."""
    parent = os.path.dirname(os.path.abspath(args.output))
    os.makedirs(parent, exist_ok=True)
    work = tempfile.mkdtemp(prefix=".export-", dir=parent)
    try:
        staged = os.path.join(work, "out")
        dictionaries = (task.source_dictionary, task.target_dictionary, args.spm, staged)
        if args.to == "hf" and ode_m2m100.has_rk_stack(model):
            ode_m2m100.save(model, options, *dictionaries)
            plain = ode_m2m100.rk_transformer(model, options)
        else:
            plain = plain_transformer(model, options)
            if args.to == "ctranslate2":
                from ode_seq.export import ctranslate2

                ctranslate2.convert(plain, fairseq_state(args, plain), task.cfg.data, work, staged)
            else:
                m2m100.save(plain, *dictionaries)
        if os.path.isdir(args.output):
            os.rmdir(args.output)
        os.replace(staged, args.output)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return plain


def main(argv: Optional[List[str]] = None, prog: str = "python -m ode_seq.cli.export") -> int:
    args = parse_args(argv, prog)
    apply_fixes()
    try:
        check_paths(args)
    except ValueError as error:  # the command line names something that is not there
        print(f"export: error: {error}", file=sys.stderr)
        return 2
    try:
        model, options, task = load_model(args)
        if args.spm is not None:
            check_subword_model(sentencepiece_file(f"--spm {args.spm}", args.spm), task)
        if args.to == "fairseq":
            plain = plain_transformer(model, options)
            save_checkpoint(fairseq_state(args, plain), args.output)
        else:
            with explaining_full_disk(args.output, lambda: serialized_size(model.state_dict())):
                plain = write_directory(args, model, options, task)
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
