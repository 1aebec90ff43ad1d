"""Write a trained ODE model's layers as the residual (Euler) model of the same layers
(:mod:`ode_seq.export.residual`): each layer evaluated once per step, so it serves at a residual
model's cost. It computes another function than the ODE model: fine-tune it first, e.g.

    ode-seq as-residual --path rk2/checkpoint_best.pt --output residual.pt
    fairseq-train DATA --user-dir USER_DIR --arch ode_transformer_lm_euler ... --finetune-from-model residual.pt

Exit status 2 for a usage error (a missing input, an output that cannot be written), 1 for a model
without a residual model of the same layers; nothing is written then.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import List, Optional

from ode_seq.checkpoint_files import load_checkpoint, save_checkpoint, verify_checkpoint_file
from ode_seq.export.residual import residual_state
from ode_seq.fairseq_fixes import apply_fixes
from ode_seq.output_files import check_output_file, same_file
from ode_seq.training_data.model_options import model_options
from ode_seq.training_data.record import MODEL_OPTIONS_KEY


def parse_args(argv: Optional[List[str]], prog: str) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog=prog, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--path", required=True, help="the ODE model's checkpoint")
    p.add_argument("--output", required=True, help="the residual model's checkpoint to write")
    p.add_argument("--data", help="the data directory the model was trained on (default: the checkpoint's)")
    return p.parse_args(argv)


def main(argv: Optional[List[str]] = None, prog: str = "ode-seq as-residual") -> int:
    args = parse_args(argv, prog)
    apply_fixes()
    try:
        if not os.path.exists(args.path):
            raise ValueError(f"--path {args.path} does not exist")
        if same_file(args.path, args.output):
            raise ValueError(f"--output {args.output} is the checkpoint to convert; write to another file")
        check_output_file(args.output, "--output")
        verify_checkpoint_file(args.path)
        state = load_checkpoint(args.path)
    except ValueError as error:
        print(f"as-residual: error: {error}", file=sys.stderr)
        return 2
    from fairseq import tasks
    from omegaconf import OmegaConf

    task_cfg = OmegaConf.create(state["cfg"]["task"])
    if args.data is not None:
        task_cfg.data = args.data
    try:
        task = tasks.setup_task(task_cfg)
        residual, dropped, model = residual_state(state, task.build_model)
    except (ValueError, FileNotFoundError) as error:
        print(f"as-residual: error: {error}", file=sys.stderr)
        return 1
    # the record of the options that define the model: the residual model's (its data's record kept)
    identity = model_options(model, residual["cfg"]["model"])
    residual["task_state"] = {**(residual.get("task_state") or {}), MODEL_OPTIONS_KEY: identity}
    save_checkpoint(residual, args.output)
    print(
        f"wrote the residual model of {args.path}'s layers to {args.output}"
        + (f"; dropped {len(dropped)} parameters only the ODE method has: {', '.join(dropped)}" if dropped else "")
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
