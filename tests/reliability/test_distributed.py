"""Data-parallel training: two gloo processes launched the way fairseq launches one process per
node (``--distributed-init-method tcp://… --distributed-rank R --distributed-no-spawn``), or by
torchrun, equal one process accumulating two batches per update (``--update-freq 2``).

fairseq's own spawner cannot start CPU workers (it spawns ``min(torch.cuda.device_count(),
world_size)`` = 0 processes), so each rank is started as its own fairseq-train. Dropout is off:
fairseq seeds every rank with ``--seed + num_updates``, so rank 1 draws rank 0's masks where the
single process draws fresh ones for its second batch; with dropout on the two runs differ by
design, not by a synchronisation error.
"""

from __future__ import annotations

import os
import socket
import subprocess
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from testkit.families import FEATURES
from tests.conftest import TinyTask, build_model, random_batch
from tests.e2e.cli import BIN, run
from tests.numerics import assert_same_tensors
from tests.reliability.corpus import (
    NO_DROPOUT,
    OPTIMISATION,
    QUIET_CPU,
    RK4_LEARNED,
    model_state,
    start,
)

UPDATES = 4


def _training(data_bin: Path, save_dir: Path):
    return [
        str(data_bin),
        *RK4_LEARNED,
        *NO_DROPOUT,
        *OPTIMISATION,
        *QUIET_CPU,
        "--seed",
        "3",
        "--max-update",
        str(UPDATES),
        "--disable-validation",
        "--no-epoch-checkpoints",
        "--save-dir",
        str(save_dir),
    ]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _two_ranks(data_bin: Path, tmp_path: Path, ddp_backend: str) -> Path:
    """Train on two gloo ranks; returns rank 0's save directory."""
    save, port = tmp_path / ddp_backend, _free_port()
    ranks = [
        start(
            "fairseq-train",
            [
                *_training(data_bin, save),
                "--distributed-world-size",
                "2",
                "--distributed-rank",
                str(rank),
                "--distributed-init-method",
                f"tcp://127.0.0.1:{port}",
                "--distributed-no-spawn",
                "--distributed-backend",
                "gloo",
                "--ddp-backend",
                ddp_backend,
            ],
            tmp_path / f"rank{rank}.log",
        )
        for rank in range(2)
    ]
    for process in ranks:
        try:
            process.wait(timeout=240)
        except subprocess.TimeoutExpired:
            for p in ranks:
                p.kill()
            raise
    logs = [(tmp_path / f"rank{rank}.log").read_text() for rank in range(2)]
    assert [p.returncode for p in ranks] == [0, 0], "\n".join(log[-3000:] for log in logs)
    assert not any("unused parameters" in log or "did not receive grad" in log for log in logs)
    return save


@pytest.fixture(scope="module")
def one_process_update_freq_2(data_bin, tmp_path_factory) -> Path:
    save = tmp_path_factory.mktemp("update_freq_2")
    out = run("fairseq-train", [*_training(data_bin, save), "--update-freq", "2"])
    assert f"num_updates={UPDATES}," in out.stdout
    return save


def test_two_gloo_ranks_equal_one_process_with_update_freq_2(data_bin, tmp_path, one_process_update_freq_2):
    two_ranks = model_state(_two_ranks(data_bin, tmp_path, "legacy_ddp") / "checkpoint_last.pt")
    one = model_state(one_process_update_freq_2 / "checkpoint_last.pt")
    assert len([k for k in one if k.endswith("combiner.proj.weight")]) == 4  # the learned gates
    assert_same_tensors(two_ranks, one, UPDATES)


def test_pytorch_ddp_ranks_equal_one_process_with_update_freq_2(data_bin, tmp_path, one_process_update_freq_2):
    two_ranks = model_state(_two_ranks(data_bin, tmp_path, "c10d") / "checkpoint_last.pt")
    one = model_state(one_process_update_freq_2 / "checkpoint_last.pt")
    assert_same_tensors(two_ranks, one, UPDATES)


def _torchrun(data_bin: Path, save: Path, *extra: str):
    """fairseq-train in 2 processes started by torchrun on this machine's CPUs."""
    return run(
        "torchrun",
        [
            "--nproc_per_node",
            "2",
            "--master_addr",
            "127.0.0.1",
            "--master_port",
            str(_free_port()),
            os.path.join(BIN, "fairseq-train"),
            *_training(data_bin, save),
            *extra,
        ],
        check=False,
        timeout=600,
    )


def test_torchrun_processes_on_cpus_equal_one_process_with_update_freq_2(data_bin, tmp_path, one_process_update_freq_2):
    result = _torchrun(data_bin, tmp_path, "--distributed-backend", "gloo")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "training on 2 devices" in result.stdout + result.stderr
    two = model_state(tmp_path / "checkpoint_last.pt")
    assert_same_tensors(two, model_state(one_process_update_freq_2 / "checkpoint_last.pt"), UPDATES)


def test_torchrun_processes_that_would_each_train_alone_are_refused_before_writing(data_bin, tmp_path):
    result = _torchrun(
        data_bin,
        tmp_path / "ckpt",
        "--distributed-backend",
        "gloo",
        "--distributed-init-method",
        f"tcp://127.0.0.1:{_free_port()}",
        "--distributed-world-size",
        "1",
    )
    assert result.returncode != 0
    assert "would make each process train on its own into the same --save-dir" in result.stderr
    assert not (tmp_path / "ckpt").exists()


@pytest.fixture(scope="module")
def gloo_group(tmp_path_factory):
    """A one-process gloo group: enough for DistributedDataParallel's unused-parameter check."""
    store = tmp_path_factory.mktemp("gloo") / "store"
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=0, world_size=1)
    yield
    dist.destroy_process_group()


class _WithUnusedLayer(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.used, self.unused = torch.nn.Linear(4, 4), torch.nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.used(x)


def test_ddp_reports_a_parameter_that_gets_no_gradient(gloo_group):
    """The control: the check below does fail for a model with an unused parameter."""
    model = DistributedDataParallel(_WithUnusedLayer(), find_unused_parameters=False)
    model(torch.ones(2, 4)).sum().backward()
    with pytest.raises(RuntimeError, match="parameters that were not used in producing loss"):
        model(torch.ones(2, 4)).sum().backward()


@pytest.mark.parametrize("feature", sorted(FEATURES))
def test_every_parameter_gets_a_gradient_under_ddp_without_find_unused_parameters(feature, gloo_group):
    arch, options = FEATURES[feature]
    task = TinyTask()
    model = build_model(arch, task, **options).train()
    names = [n for n, _ in model.named_parameters()]
    ddp = DistributedDataParallel(model, find_unused_parameters=False)
    for seed in range(2):  # DDP reports unused parameters when the next forward starts
        src, lengths, prev = random_batch(task, [5, 3], seed=seed)
        ddp(src, lengths, prev)[0].logsumexp(-1).mean().backward()
    assert [n for n, p in zip(names, model.parameters()) if p.grad is None] == []
