"""Processes started by torchrun join one data-parallel training, on CPUs (gloo) and GPUs (NCCL)."""

from __future__ import annotations

import functools
import os
from typing import Callable, Optional

import torch
from fairseq.distributed import utils as distributed_utils

from .fix import FairseqFix

LAUNCH_VARIABLES = ("MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK")


def launched_world_size() -> Optional[int]:
    """The number of processes torchrun (or torch.distributed.launch) started, None outside one."""
    if not all(name in os.environ for name in LAUNCH_VARIABLES):
        return None
    return int(os.environ["WORLD_SIZE"])


def on_cpu(cfg) -> bool:
    return cfg.common.cpu or not torch.cuda.is_available()


def join_launched_processes(cfg) -> None:
    """Take rank and world size from torchrun's environment (``cfg``: fairseq's whole config), and
    refuse settings under which processes would train alone or cannot communicate."""
    world = launched_world_size()
    dist = cfg.distributed_training
    if world is not None and world > 1:
        if dist.distributed_init_method is None:
            dist.distributed_init_method = "env://"
            dist.distributed_world_size = world
            dist.distributed_rank = int(os.environ["RANK"])
            dist.device_id = 0 if on_cpu(cfg) else int(os.environ.get("LOCAL_RANK", 0))
            dist.distributed_no_spawn = True
        elif (dist.distributed_world_size, dist.distributed_rank) != (world, int(os.environ["RANK"])):
            raise ValueError(
                f"torchrun started {world} processes (WORLD_SIZE={world}, RANK={os.environ['RANK']}), "
                f"but --distributed-init-method {dist.distributed_init_method} with world size "
                f"{dist.distributed_world_size} and rank {dist.distributed_rank} would make each "
                "process train on its own into the same --save-dir (nothing was written): leave out "
                "--distributed-init-method, --distributed-world-size and --distributed-rank, which "
                "the plugin takes from torchrun"
            )
    if dist.distributed_world_size > 1 and on_cpu(cfg) and dist.distributed_backend == "nccl":
        raise ValueError(
            "--distributed-backend nccl needs CUDA GPUs, but this run is on CPUs: pass "
            "--distributed-backend gloo (nothing was written)"
        )


def joining_launched_processes(call_main: Callable) -> Callable:
    """fairseq's ``distributed_utils.call_main`` that first runs :func:`join_launched_processes`."""

    @functools.wraps(call_main)
    def call(cfg, main, **kwargs):
        join_launched_processes(cfg)
        return call_main(cfg, main, **kwargs)

    return call


class TorchrunLaunch(FairseqFix):
    """Under torchrun, fairseq reads the launcher's environment only when its default world size
    (the number of CUDA devices) is above 1: on CPUs or one GPU every process trains alone as rank
    0 of 1, all writing the same --save-dir; with ``--distributed-world-size`` set it divides the
    rank by ``torch.cuda.device_count()`` (ZeroDivisionError on CPUs) and picks the device as
    rank % count instead of torchrun's LOCAL_RANK. The fix: ``call_main`` takes world size, rank
    and LOCAL_RANK from torchrun's environment, and refuses, before anything is written, an
    explicit init method whose world size or rank disagree with it, and NCCL on CPUs."""

    name = "torchrun"
    issues = ("facebookresearch/fairseq#3318", "facebookresearch/fairseq#3385")
    patches = ("fairseq.distributed.utils.call_main",)

    def apply(self) -> None:
        distributed_utils.call_main = joining_launched_processes(distributed_utils.call_main)
