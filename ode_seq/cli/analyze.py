"""Analyse a trained checkpoint, a translation model or a language model:

    python -m ode_seq.cli.analyze --path CKPT --data DATA-BIN --out DIR

Writes titled PNG figures and ``report.json`` (see :mod:`ode_seq.analysis.report`): trajectory
statistics and gates on a validation batch, weight spectra along depth, token-level Lyapunov
exponents for one sentence (``--sentence``, tokenised and BPE-applied like the data; default:
the first pair of ``--subset``; for a language model, the exponents of the last position of its
context, ``--sentence`` or the first line of ``--subset``), Euler's global error bound against
the measured error of every Euler block, and with ``--teacher`` the per-layer error of a
distilled student against its teacher. ``--model-overrides`` analyses the model with other
options, e.g. another step count.
"""

from __future__ import annotations

import argparse
import ast
import logging
import os
import sys
from typing import Dict, List, Optional, Tuple

from fairseq.data import data_utils
from torch import Tensor

from ode_seq.analysis.checkpoint import (
    encode_context,
    encode_sentence,
    first_context,
    first_pair,
    load_model,
    parameter_count,
    token_namer,
    unknown_count,
    validation_batch,
)
from ode_seq.analysis.report import AnalysisInputs, write_report
from ode_seq.analysis.solver_counts import read_step_scores
from ode_seq.analysis.token_sensitivity import greedy_target
from ode_seq.checkpoint_files import load_checkpoint
from ode_seq.cli.plugin_dir import plugin_directory
from ode_seq.model_inputs import is_language_model, model_stacks
from ode_seq.models.criteria.trajectory_loss import CONTROL_TIME_MODES
from ode_seq.models.teacher import check_teacher_fits, load_teacher
from ode_seq.models.trajectory_errors import trajectory_errors
from ode_seq.output_files import check_output_directory
from ode_seq.training_data.record import read_record


def parse_args(argv: Optional[List[str]] = None, prog: str = "python -m ode_seq.cli.analyze") -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog=prog, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--path", required=True, help="checkpoint file")
    parser.add_argument("--data", required=True, help="fairseq data-bin directory")
    parser.add_argument("--out", required=True, help="report directory (created)")
    parser.add_argument(
        "--user-dir", default=plugin_directory(), help="fairseq plugin directory to import first (default: %(default)s)"
    )
    parser.add_argument("--subset", default="valid", help="data split to analyse (default: valid)")
    parser.add_argument(
        "--source-lang",
        help="a translation model's source language in --data (default: the checkpoint's, else inferred from --data)",
    )
    parser.add_argument("--target-lang", help="its target language (with --source-lang)")
    parser.add_argument("--max-sentences", type=int, default=32, help="sentences in the trajectory batch (default: 32)")
    parser.add_argument(
        "--sentence",
        help="source sentence for the Lyapunov exponents, tokenised "
        "like the data (default: the first source of --subset); a language model's context",
    )
    parser.add_argument(
        "--target", help="target for teacher forcing with --sentence (default: the model's greedy translation)"
    )
    parser.add_argument(
        "--lyapunov-exponents", type=int, metavar="M", help="exponents per token (default: all, the model width)"
    )
    parser.add_argument(
        "--step-scores", metavar="FILE", help="JSON {steps, scores, metric} measured at several step counts"
    )
    parser.add_argument(
        "--model-overrides",
        default="{}",
        metavar="DICT",
        help="model options to change, as fairseq's --model-overrides, e.g. "
        "\"{'encoder_ode_steps': 12, 'decoder_ode_steps': 12}\"",
    )
    parser.add_argument(
        "--teacher",
        metavar="PATH",
        help="the pre-norm fairseq transformer a student was distilled from: report its per-layer error against it",
    )
    parser.add_argument(
        "--control-times",
        choices=CONTROL_TIME_MODES,
        default="distance",
        help="control times of the teacher layers, as in training (default: distance)",
    )
    parser.add_argument(
        "--control-time-temperature",
        type=float,
        default=30.0,
        help="temperature of distance control times, as in training (default: 30)",
    )
    args = parser.parse_args(argv)
    try:
        args.model_overrides = ast.literal_eval(args.model_overrides)
    except (ValueError, SyntaxError):
        args.model_overrides = None
    if not isinstance(args.model_overrides, dict):
        parser.error("--model-overrides must be a Python dict literal, e.g. \"{'encoder_ode_steps': 12}\"")
    if args.max_sentences < 1:
        parser.error(f"--max-sentences must be at least 1, got {args.max_sentences}")
    if args.lyapunov_exponents is not None and args.lyapunov_exponents < 1:
        parser.error(
            f"--lyapunov-exponents must be at least 1, got {args.lyapunov_exponents} (leave it out for all of them)"
        )
    if args.target is not None and args.sentence is None:
        parser.error("--target needs --sentence (the default sentence uses its reference)")
    if (args.source_lang is None) != (args.target_lang is None):
        parser.error("--source-lang and --target-lang go together: give both or neither")
    return args


def check_language_model_options(args: argparse.Namespace) -> None:
    """ValueError for the options a language model has no use for."""
    if args.target is not None:
        raise ValueError("--target: a language model has no target; --sentence is its context")


def sentence_inputs(args: argparse.Namespace, model, task) -> Tuple[Tensor, Optional[Tensor], Dict[str, object]]:
    """(source, target, how they were chosen) for the Lyapunov exponents; for a language model
    (source = its context, target None)."""
    if is_language_model(model):
        if args.sentence is None:
            return first_context(task, args.subset), None, {"from": f"first line of {args.subset}"}
        context = encode_context(task, args.sentence)
        return context, None, {"from": "--sentence", "unknown_tokens": unknown_count(task, context, "source")}
    if args.sentence is None:
        source, target = first_pair(task, args.subset)
        return source, target, {"from": f"first pair of {args.subset}"}
    source = encode_sentence(task, args.sentence, "source")
    info: Dict[str, object] = {"from": "--sentence", "unknown_source_tokens": unknown_count(task, source, "source")}
    if args.target is None:
        eos = task.target_dictionary.eos()
        target = greedy_target(model, source, eos, max_len=2 * source.numel() + 10)
        info["target"] = "greedy translation"
    else:
        target = encode_sentence(task, args.target, "target")
        info["target"] = "--target"
    return source, target, info


def language_pair_overrides(args: argparse.Namespace) -> Dict[str, str]:
    """The task's languages: --source-lang/--target-lang; without them nothing, unless the checkpoint
    is a translation model trained without a pair and --data names none either (fairseq fails with
    "Could not infer language pair"): ValueError naming the options, and the pair it recorded."""
    if args.source_lang is not None:
        return {"source_lang": args.source_lang, "target_lang": args.target_lang}
    if not os.path.isfile(args.path) or not os.path.isdir(args.data):
        return {}  # load_model names what is missing
    state = load_checkpoint(args.path)
    task = (state.get("cfg") or {}).get("task") or {}
    if "source_lang" not in task or task["source_lang"] or all(data_utils.infer_language_pair(args.data)):
        return {}
    recorded = read_record(state.get("task_state")).language_pair
    pair = f"--source-lang {recorded[0]} --target-lang {recorded[1]}" if recorded else "--source-lang and --target-lang"
    language_model_data = os.path.isfile(os.path.join(args.data, "dict.txt"))
    data_note = "; its dict.txt is a language model's data" if language_model_data else ""
    raise ValueError(
        f"--data {args.data} names no language pair (no train.SRC-TGT.* files{data_note}), and {args.path} "
        f"is a translation model (--task {task.get('_name')}) trained without --source-lang/--target-lang: "
        f"pass {pair} with the data directory it was trained on (holding its dict.SRC.txt and dict.TGT.txt)"
    )


def load_inputs(args: argparse.Namespace):
    """(model, task, validation batch, teacher errors), the options checked against the model."""
    overrides = {**language_pair_overrides(args), **args.model_overrides}
    model, task = load_model(args.path, args.data, args.user_dir, overrides)
    if is_language_model(model):
        check_language_model_options(args)
    width = min(getattr(model, stack).embed_tokens.embedding_dim for stack in model_stacks(model))
    if args.lyapunov_exponents is not None and args.lyapunov_exponents > width:
        raise ValueError(
            f"--lyapunov-exponents {args.lyapunov_exponents} exceeds the model "
            f"width {width}: ask for at most {width} (or leave it out for all)"
        )
    batch = validation_batch(task, args.subset, args.max_sentences)
    teacher_errors = None
    if args.teacher:
        teacher = load_teacher(args.teacher, task).float()
        check_teacher_fits(teacher, model)
        teacher_errors = trajectory_errors(
            model,
            teacher,
            batch["net_input"],
            task.source_dictionary.pad(),
            task.target_dictionary.pad(),
            args.control_times,
            args.control_time_temperature,
        )
    return model, task, batch, teacher_errors


def main(argv: Optional[List[str]] = None, prog: str = "python -m ode_seq.cli.analyze") -> int:
    args = parse_args(argv, prog)
    logging.getLogger().setLevel(os.environ.get("LOGLEVEL", "INFO").upper())
    try:
        check_output_directory(args.out, "--out")
        step_scores = read_step_scores(args.step_scores) if args.step_scores else None
        model, task, batch, teacher_errors = load_inputs(args)
    except (FileNotFoundError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    source, target, sentence_info = sentence_inputs(args, model, task)
    inputs = AnalysisInputs(
        model=model,
        batch=batch,
        pad=task.source_dictionary.pad(),
        source=source,
        target=target,
        token_string=token_namer(task),
        num_exponents=args.lyapunov_exponents,
        step_scores=step_scores,
        teacher_errors=teacher_errors,
    )
    header = {
        "checkpoint": os.path.abspath(args.path),
        "model_overrides": args.model_overrides,
        "parameters": parameter_count(model),
        "subset": args.subset,
        "batch_sentences": int(batch["nsentences"]),
        "sentence": sentence_info,
    }
    path = write_report(inputs, args.out, header)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
