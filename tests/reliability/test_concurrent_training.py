"""Concurrent runs on one save directory or output (fix ``save_dir_lock``).

A second fairseq-train on a --save-dir that a running training uses is refused, naming the save
directory and the other run's process; the lock dies with its process, so a killed run never blocks
the next; only data-parallel rank 0 takes it (the distributed tests of test_distributed.py run two
ranks on one save directory). Two ``ode-seq average`` runs writing one output leave one complete
average, never a mixture or a temporary file.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from omegaconf import OmegaConf

from ode_seq.checkpoint_files import load_checkpoint, save_checkpoint
from ode_seq.fairseq_fixes.save_dir_lock import LOCK_FILE, lock_save_dir, locking_save_dir
from tests.e2e.cli import BIN, ROOT, run
from tests.reliability.corpus import OPTIMISATION, QUIET_CPU, RK4_LEARNED, final_error, start, tool_env

HOLD_LOCK = "import sys, time; from ode_seq.fairseq_fixes.save_dir_lock import lock_save_dir; "


def training(data_bin: Path, save: Path, updates: int):
    return [str(data_bin), *RK4_LEARNED, *OPTIMISATION, *QUIET_CPU, "--max-update", str(updates)] + [
        "--disable-validation",
        "--save-dir",
        str(save),
    ]


def wait_for_line(log: Path, text: str, process: subprocess.Popen, timeout: float = 240.0) -> None:
    deadline = time.monotonic() + timeout
    while text not in log.read_text():
        assert process.poll() is None, f"the first training ended early:\n{log.read_text()[-3000:]}"
        assert time.monotonic() < deadline, f"no '{text}' after {timeout} s"
        time.sleep(0.5)


def test_second_training_on_a_save_dir_in_use_is_refused_and_a_killed_runs_lock_blocks_nothing(data_bin, tmp_path):
    save = tmp_path / "ckpt"
    first = start("fairseq-train", training(data_bin, save, 100_000), tmp_path / "first.log")
    try:
        wait_for_line(tmp_path / "first.log", "training on 1 devices", first)
        second = run("fairseq-train", training(data_bin, save, 2), check=False)
        assert second.returncode != 0
        error = final_error(second.stdout + second.stderr)
        assert f"--save-dir {save} is in use by another training (process {first.pid} on " in error
        assert "give this training another --save-dir (nothing was trained)" in error
        assert "begin training" not in second.stdout
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait()
    third = run("fairseq-train", training(data_bin, save, 2), check=False)
    assert third.returncode == 0, third.stderr[-3000:]
    assert (save / "checkpoint_last.pt").is_file()


def holding_lock(directory: Path, then: str = "time.sleep(600)") -> subprocess.Popen:
    """A process that locks ``directory`` as a training would, prints 'locked', then runs ``then``."""
    code = HOLD_LOCK + f"lock_save_dir({str(directory)!r}); print('locked', flush=True); {then}"
    process = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, cwd=ROOT)
    assert process.stdout.readline() == "locked\n"
    return process


def saving_config(save: Path, rank: int):
    return OmegaConf.create(
        {"checkpoint": {"no_save": False, "save_dir": str(save)}, "distributed_training": {"distributed_rank": rank}}
    )


def test_only_the_saving_rank_takes_the_lock(tmp_path):
    built = []
    init = locking_save_dir(lambda trainer, cfg: built.append(cfg.distributed_training.distributed_rank))
    holder = holding_lock(tmp_path)
    try:
        init(None, saving_config(tmp_path, rank=1))
        assert built == [1]
        with pytest.raises(ValueError, match=rf"in use by another training \(process {holder.pid} on "):
            init(None, saving_config(tmp_path, rank=0))
        assert built == [1]
    finally:
        holder.kill()
        holder.wait()


def test_a_forked_child_does_not_keep_the_lock_of_a_killed_training(tmp_path):
    """A data loader worker, forked by the training, outlives it for a moment after SIGKILL."""
    holder = holding_lock(tmp_path, "import os; child = os.fork(); child and print(child, flush=True); time.sleep(600)")
    child = int(holder.stdout.readline())
    try:
        holder.kill()
        holder.wait()
        os.kill(child, 0)  # the child still runs ...
        lock_save_dir(str(tmp_path))  # ... but holds no lock
    finally:
        os.kill(child, signal.SIGKILL)


def test_lock_file_names_the_training_process(tmp_path):
    holder = holding_lock(tmp_path)
    try:
        assert (tmp_path / LOCK_FILE).read_text().startswith(f"{holder.pid} on ")
    finally:
        holder.kill()
        holder.wait()


def test_two_averages_writing_one_output_leave_one_complete_average(tmp_path):
    fixture = load_checkpoint(str(Path(ROOT) / "tests" / "fixtures" / "checkpoints" / "rk4.pt"))
    for scale in (1, 2, 3):
        state = {
            **fixture,
            "model": {k: scale * v if v.is_floating_point() else v for k, v in fixture["model"].items()},
        }
        save_checkpoint(state, str(tmp_path / f"checkpoint{scale}.pt"))
    command = [os.path.join(BIN, "ode-seq"), "average", "--output", "avg.pt", "--inputs"]
    averages = [
        subprocess.Popen([*command, *inputs], cwd=tmp_path, env=tool_env(), stdout=subprocess.PIPE)
        for inputs in (["checkpoint1.pt", "checkpoint2.pt"], ["checkpoint2.pt", "checkpoint3.pt"])
    ]
    assert [process.wait(timeout=300) for process in averages] == [0, 0]
    averaged = load_checkpoint(str(tmp_path / "avg.pt"))["model"]

    def average_of_scales(scale: float) -> bool:
        return all(
            torch.allclose(averaged[k], scale * v) if v.is_floating_point() else torch.equal(averaged[k], v)
            for k, v in fixture["model"].items()
        )

    assert average_of_scales(1.5) or average_of_scales(2.5)
    assert sorted(os.listdir(tmp_path)) == ["avg.pt", "checkpoint1.pt", "checkpoint2.pt", "checkpoint3.pt"]
