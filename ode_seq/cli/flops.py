"""Counted FLOPs per token of the model a ``fairseq-train`` command line would train, on the first
batch that training would see (``ode_seq.analysis.flops``: torch's FLOP counter, matrix products and
attention, forward and backward).

ode-seq flops DATA --task language_modeling --user-dir USER_DIR --arch ARCH [fairseq-train options]

Prints ``key=value`` lines: tokens (target tokens of the batch), training_flops and
inference_flops (the batch), training_flops_per_token and inference_flops_per_token. Nothing is
trained or written; --save-dir and the budget options are accepted and ignored.
"""

from __future__ import annotations

import argparse
import sys
from typing import List, Optional

from ode_seq.analysis.flops import FlopCount, count_flops


def first_training_batch_flops(argv: List[str]) -> FlopCount:
    """Build task, model and criterion as fairseq-train does from ``argv``, take the first batch of
    epoch 1 (shuffled under the run's seed) and count it."""
    from fairseq import options, tasks, utils
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf

    args = options.parse_args_and_arch(options.get_training_parser(), input_args=argv)
    cfg = convert_namespace_to_omegaconf(args)
    utils.import_user_module(cfg.common)
    utils.set_torch_seed(cfg.common.seed)
    task = tasks.setup_task(cfg.task)
    model = task.build_model(cfg.model)
    criterion = task.build_criterion(cfg.criterion)
    subset = cfg.dataset.train_subset
    task.load_dataset(subset, combine=False, epoch=1)
    batches = task.get_batch_iterator(
        dataset=task.dataset(subset),
        max_tokens=cfg.dataset.max_tokens,
        max_sentences=cfg.dataset.batch_size,
        max_positions=utils.resolve_max_positions(task.max_positions(), model.max_positions()),
        ignore_invalid_inputs=True,
        required_batch_size_multiple=cfg.dataset.required_batch_size_multiple,
        seed=cfg.common.seed,
        num_workers=0,
        epoch=1,
    )
    sample = next(iter(batches.next_epoch_itr(shuffle=True)))
    return count_flops(model, lambda: criterion(model, sample)[0], sample["net_input"], int(sample["ntokens"]))


def main(argv: Optional[List[str]] = None, prog: str = "ode-seq flops") -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(
        prog=prog,
        usage=f"{prog} [-h] DATA [fairseq-train options]",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    if not argv:
        parser.error("give DATA and fairseq-train's options")
    if argv[0] in ("-h", "--help"):
        parser.parse_args(["--help"])  # prints the help and exits 0
    sys.stdout.write(first_training_batch_flops(argv).lines())
    return 0


if __name__ == "__main__":
    sys.exit(main())
