"""Export a model as a plain fairseq ``transformer`` checkpoint:

- a non-autonomous ODE Transformer at any step count. Step n of an Euler block with weights
  θ(τ_n) and step size h is the pre-norm layer with weights θ(τ_n) whose output projections
  (self-attention, cross-attention, fc2) are scaled by h (:mod:`ode_seq.layers.time_dependent`);
- a ``lora_transformer`` (step-count adaptation's LoRA fine-tuning) with its adapters merged,
  W ← W + (α/r)·B A (:mod:`ode_seq.models.lora`).

The checkpoint written holds only tensors and plain containers, so fairseq-generate loads it
without this plugin and with safe loading on.

    python -m ode_seq.cli.export --path ckpt.pt --encoder-steps 12 --decoder-steps 12 --output plain.pt
    python -m ode_seq.cli.export --path lora/checkpoint_last.pt --output plain.pt
"""
from __future__ import annotations

import argparse
import os
import sys
from typing import Dict, List, Optional, Tuple

import torch
from fairseq import checkpoint_utils

from ode_seq.checkpoint_files import load_checkpoint, save_checkpoint, verify_checkpoint_file
from ode_seq.fairseq_fixes import apply_fixes
from ode_seq.models import LoRATransformerModel, NonAutonomousODETransformerModel
from ode_seq.models.lora import merge_adapters
from ode_seq.output_files import check_output_file, same_file

SCALED_BY_STEP = ("self_attn.out_proj.", "encoder_attn.out_proj.", "fc2.")


def discrete_state_dict(model) -> Dict[str, torch.Tensor]:
    """The state dict of the equivalent fairseq ``transformer`` (one layer per Euler step)."""
    state = {k: v for k, v in model.state_dict().items() if ".layers." not in k}
    for side in ("encoder", "decoder"):
        (block,) = getattr(model, side).layers
        solver = block.solver
        if solver.tableau.stages != 1 or block.field_form != "residual-branch":
            raise ValueError(
                f"only Euler steps of the residual-branch field are Transformer layers; the {side} "
                f"uses {solver.method} with --ode-field {block.field_form}: export with "
                f"--model-overrides \"{{'{side}_ode_method': 'euler'}}\" or keep the ODE model"
            )
        h = solver.step_size
        with torch.no_grad():
            for n in range(solver.steps):
                tau = solver.stage_time(n, 0) / solver.interval
                for name, value in block.weights_at(tau).items():
                    scale = h if name.startswith(SCALED_BY_STEP) else 1.0
                    state[f"{side}.layers.{n}.{name}"] = (value * scale).detach().clone()
    return state


def transformer_model_config(args, encoder_steps: int, decoder_steps: int) -> dict:
    config = {
        k: v for k, v in vars(args).items()
        if not k.startswith(("time_", "ode_", "lora_")) and "_ode_" not in k
    }
    config.update(
        _name="transformer", arch="transformer", encoder_layers=encoder_steps,
        decoder_layers=decoder_steps,
    )
    return config


def plain_state_dict(model, path: str, arch: str) -> Tuple[Dict[str, torch.Tensor], Tuple[int, int]]:
    """(state dict of the equivalent fairseq ``transformer``, its encoder and decoder layers)."""
    if isinstance(model, NonAutonomousODETransformerModel):
        steps = (model.encoder.layers[0].solver.steps, model.decoder.layers[0].solver.steps)
        return discrete_state_dict(model), steps
    if isinstance(model, LoRATransformerModel):
        return merge_adapters(model).state_dict(), (len(model.encoder.layers), len(model.decoder.layers))
    raise ValueError(
        f"{path} holds a {arch} model; export needs ode_transformer_nonauto or lora_transformer"
    )


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="python -m ode_seq.cli.export", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--path", required=True, help="checkpoint of an ode_transformer_nonauto or lora_transformer model")
    p.add_argument("--encoder-steps", type=int, help="Euler steps (layers) of a non-autonomous encoder (default: trained)")
    p.add_argument("--decoder-steps", type=int, help="Euler steps (layers) of a non-autonomous decoder (default: trained)")
    p.add_argument("--output", required=True, help="fairseq transformer checkpoint to write")
    args = p.parse_args(argv)
    overrides = {}
    for side in ("encoder", "decoder"):
        steps = getattr(args, f"{side}_steps")
        if steps is not None and steps < 1:
            p.error(f"--{side}-steps must be a positive number of steps (layers), got {steps}")
        if steps is not None:
            overrides[f"{side}_ode_steps"] = steps
    apply_fixes()
    try:
        check_output_file(args.output, "--output")
        if same_file(args.path, args.output):
            raise ValueError(f"--output {args.output} is the checkpoint to export; write to another file")
        if not os.path.exists(args.path):
            raise ValueError(f"checkpoint not found: {args.path}")
        verify_checkpoint_file(args.path)
        (model,), cfg, _ = checkpoint_utils.load_model_ensemble_and_task([args.path], arg_overrides=overrides)
        if overrides and not isinstance(model, NonAutonomousODETransformerModel):
            raise ValueError("--encoder-steps and --decoder-steps apply to ode_transformer_nonauto models")
        state_dict, steps = plain_state_dict(model.eval(), args.path, cfg.model.arch)
    except ValueError as error:
        print(f"export: error: {error}", file=sys.stderr)
        return 1
    state = load_checkpoint(args.path)
    state["model"] = state_dict
    state["cfg"]["model"] = transformer_model_config(cfg.model, *steps)
    state["cfg"]["common"]["user_dir"] = None
    state["args"] = None
    state["last_optimizer_state"] = None
    save_checkpoint(state, args.output)
    print(f"exported {steps[0]} encoder and {steps[1]} decoder layers to {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
