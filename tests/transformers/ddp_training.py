"""Run by torchrun with two processes on the CPU (test_training.py::test_ddp_*): trains the tiny
model with Trainer (DDP over gloo), then another copy with an accelerate loop, and writes for this
rank the world size, the loss on the data before and after, and the trained parameters to
OUTPUT/rank{rank}.pt."""

import sys

import torch
import torch.distributed as dist

from tests.transformers.training_runs import loss_on_the_data, tiny_model, train_with_accelerate, train_with_trainer


def trained(train) -> dict:
    model = tiny_model()
    before = loss_on_the_data(model)
    train(model)
    parameters = {name: p.detach().clone() for name, p in model.named_parameters()}
    return dict(loss_before=before, loss_after=loss_on_the_data(model), parameters=parameters)


def main(output: str) -> None:
    record = dict(trainer=trained(lambda model: train_with_trainer(model, output, ddp_backend="gloo")))
    record["accelerate"] = trained(train_with_accelerate)
    record["world_size"] = dist.get_world_size()
    torch.save(record, f"{output}/rank{dist.get_rank()}.pt")


if __name__ == "__main__":
    main(sys.argv[1])
