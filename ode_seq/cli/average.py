"""Average the parameters of several fairseq checkpoints (loaded with torch's safe unpickler).

θ̄ = (1/N) Σ_n θ_n   for every floating-point parameter; other entries come from the newest.
Checkpoints that are not of one run (another architecture, other parameter shapes, dictionaries,
language pair or training run) or that record other model options (a run resumed with
--allow-changed-options) are refused with exit status 2.

python -m ode_seq.cli.average --inputs CKPT_DIR --num-epoch-checkpoints 5 --output avg.pt
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections import OrderedDict
from typing import Dict, List, Optional

import torch

from ode_seq.checkpoint_files import (
    allow_fairseq_checkpoint_types,
    check_finite_parameters,
    load_checkpoint,
    save_checkpoint,
)
from ode_seq.output_files import check_output_file, same_file
from ode_seq.training_data.model_options import options_difference
from ode_seq.training_data.record import TrainingRecord, missing_record_note, read_record, record_difference


def last_checkpoints(directory: str, count: int, kind: str) -> List[str]:
    """The ``count`` newest checkpoint{EPOCH}.pt (kind 'epoch') or checkpoint_E_U.pt ('update')."""
    pattern = re.compile(r"checkpoint(\d+)\.pt$" if kind == "epoch" else r"checkpoint_\d+_(\d+)\.pt$")
    found = sorted(
        ((int(m.group(1)), name) for name in os.listdir(directory) if (m := pattern.match(name))),
        reverse=True,
    )
    if len(found) < count:
        raise ValueError(
            f"asked to average the last {count} {kind} checkpoints but {directory} holds "
            f"{len(found)}; lower --num-{kind}-checkpoints or train longer"
        )
    return [os.path.join(directory, name) for _, name in found[:count]]


def architecture(state: Dict) -> Optional[str]:
    """The ``--arch`` a fairseq checkpoint was trained with (None if it does not say)."""
    for config in ((state.get("cfg") or {}).get("model"), state.get("args")):
        arch = getattr(config, "arch", None) or (config.get("arch") if isinstance(config, dict) else None)
        if arch:
            return arch
    return None


def architecture_difference(path: str, state: Dict, first: str, first_state: Dict) -> Optional[str]:
    arch, first_arch = architecture(state), architecture(first_state)
    return f"{path} was trained as --arch {arch}, {first} as --arch {first_arch}" if arch != first_arch else None


def first_difference(path: str, state: Dict, first: str, first_state: Dict) -> Optional[str]:
    """How checkpoint ``path`` differs from ``first`` in parameter names or shapes."""
    model, reference = state["model"], first_state["model"]
    for name in reference:
        if name not in model:
            return f"{path} has no parameter {name}, which {first} has"
        if model[name].shape != reference[name].shape:
            return (
                f"parameter {name} has shape {tuple(model[name].shape)} in {path} but "
                f"{tuple(reference[name].shape)} in {first}"
            )
    extra = next((name for name in model if name not in reference), None)
    return f"{path} has a parameter {extra}, which {first} has not" if extra else None


class CheckpointsDiffer(ValueError):
    """Checkpoints that are not of one run: a usage error (exit 2)."""


def average(paths: List[str]) -> Dict:
    """The newest checkpoint's state with its model parameters replaced by the mean over
    ``paths``, which must share the architecture, every parameter's name and shape and, where
    they record it (:mod:`ode_seq.training_data.record`), the dictionaries, language pair, run and
    model options."""
    newest: Optional[Dict] = None
    first_record: Optional[TrainingRecord] = None
    sums: "OrderedDict[str, torch.Tensor]" = OrderedDict()
    for path in paths:
        state = load_checkpoint(path)
        model = state["model"]
        check_finite_parameters(path, model)
        record = read_record(state.get("task_state"))
        note = missing_record_note(path, record)
        if note:
            print(f"average: note: {note}", file=sys.stderr)
        if newest is None:
            newest, first_record = state, record
            sums = OrderedDict((k, v.double() if v.is_floating_point() else v.clone()) for k, v in model.items())
            continue
        difference = (
            architecture_difference(path, state, paths[0], newest)
            or record_difference(path, record, paths[0], first_record)
            or options_difference(path, record.model_options, paths[0], first_record.model_options)
            or first_difference(path, state, paths[0], newest)
        )
        if difference:
            raise CheckpointsDiffer(f"{difference}; average checkpoints of one run, saved with the same model options")
        for k, v in model.items():
            if v.is_floating_point():
                sums[k] += v.double()
    assert newest is not None
    dtypes = {k: v.dtype for k, v in newest["model"].items()}
    newest["model"] = OrderedDict(
        (k, (v / len(paths)).to(dtypes[k]) if v.is_floating_point() else v) for k, v in sums.items()
    )
    return newest


def main(argv: Optional[List[str]] = None, prog: str = "python -m ode_seq.cli.average") -> int:
    p = argparse.ArgumentParser(prog=prog, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--inputs", nargs="+", required=True, help="checkpoint files, or one directory")
    p.add_argument("--output", required=True, help="averaged checkpoint to write")
    group = p.add_mutually_exclusive_group()
    group.add_argument("--num-epoch-checkpoints", type=int, metavar="N", help="average the last N checkpoint{EPOCH}.pt")
    group.add_argument("--num-update-checkpoints", type=int, metavar="N", help="average the last N checkpoint_E_U.pt")
    args = p.parse_args(argv)
    count = args.num_epoch_checkpoints if args.num_epoch_checkpoints is not None else args.num_update_checkpoints
    if count is not None and count < 1:
        kind = "epoch" if args.num_epoch_checkpoints is not None else "update"
        p.error(f"--num-{kind}-checkpoints must be a positive number of checkpoints, got {count}")
    allow_fairseq_checkpoint_types()
    try:
        check_output_file(args.output, "--output")
        if count is not None:
            if len(args.inputs) != 1 or not os.path.isdir(args.inputs[0]):
                raise ValueError("--num-*-checkpoints needs exactly one directory in --inputs")
            kind = "epoch" if args.num_epoch_checkpoints else "update"
            paths = last_checkpoints(args.inputs[0], count, kind)
        else:
            paths = args.inputs
        folders = [path for path in paths if os.path.isdir(path)]
        if folders:
            raise ValueError(
                f"{folders[0]} is a directory: pass checkpoint files, or one directory "
                "with --num-epoch-checkpoints N or --num-update-checkpoints N"
            )
        missing = [path for path in paths if not os.path.isfile(path)]
        if missing:
            raise ValueError(f"checkpoint not found: {', '.join(missing)}")
        overwritten = [path for path in paths if same_file(path, args.output)]
        if overwritten:
            raise ValueError(
                f"--output {args.output} is one of the checkpoints to average; write the average to another file"
            )
        state = average(paths)
        save_checkpoint(state, args.output)
    except CheckpointsDiffer as error:
        print(f"average: error: {error}", file=sys.stderr)
        return 2
    except ValueError as error:
        print(f"average: error: {error}", file=sys.stderr)
        return 1
    print(f"averaged {len(paths)} checkpoints: {', '.join(os.path.basename(x) for x in paths)} -> {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
