"""Print a fairseq checkpoint's parameter count, split into interface and stacks.

    python examples/distillation/parameter_count.py CHECKPOINT DATA_BIN

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
    parser.add_argument("checkpoint")
    parser.add_argument("data_bin")
    args = parser.parse_args()
    for path in (args.checkpoint, args.data_bin):
        if not os.path.exists(path):
            sys.exit(f"error: {path} does not exist")

    from fairseq import checkpoint_utils, utils

    utils.import_user_module(argparse.Namespace(user_dir=os.path.join(REPO_ROOT, "user_dir")))
    from ode_seq.models.teacher import interface_parameters

    models, _ = checkpoint_utils.load_model_ensemble([args.checkpoint], arg_overrides={"data": args.data_bin})
    model = models[0]
    total = sum(p.numel() for p in model.parameters())
    interface = sum(p.numel() for p in interface_parameters(model))
    print(f"parameters {total} (interface {interface}, encoder/decoder stacks {total - interface})")


if __name__ == "__main__":
    main()
