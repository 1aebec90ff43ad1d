"""Print fairseq checkpoints' parameter counts, split into interface and stacks, a line each.

    python examples/distillation/parameter_count.py DATA_BIN CHECKPOINT [CHECKPOINT ...]

Interface = embeddings, positions, final norms and output projection (what a teacher hands a
student); shared tensors are counted once.
"""

from __future__ import annotations

import argparse
import os
import sys

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data_bin")
    parser.add_argument("checkpoints", nargs="+", metavar="checkpoint")
    args = parser.parse_args()
    for path in (args.data_bin, *args.checkpoints):
        if not os.path.exists(path):
            sys.exit(f"error: {path} does not exist")

    from fairseq import checkpoint_utils, utils

    utils.import_user_module(argparse.Namespace(user_dir=os.path.join(REPO_ROOT, "user_dir")))
    from ode_seq.models.teacher import interface_parameters

    for checkpoint in args.checkpoints:
        models, _ = checkpoint_utils.load_model_ensemble([checkpoint], arg_overrides={"data": args.data_bin})
        total = sum(p.numel() for p in models[0].parameters())
        interface = sum(p.numel() for p in interface_parameters(models[0]))
        print(f"parameters {total} (interface {interface}, encoder/decoder stacks {total - interface})")


if __name__ == "__main__":
    main()
