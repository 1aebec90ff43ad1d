"""A training run killed with SIGKILL mid-epoch and restarted with the same command ends with
exactly the parameters of the uninterrupted run (CPU, one thread, same seed).

fairseq makes this possible by saving the data iterator's position (``iterations_in_epoch``)
and the optimizer/scheduler state in every checkpoint, and by seeding dropout with
``--seed + num_updates`` before each update, so a resumed update draws the same masks.
"""

from __future__ import annotations

import re
import shutil

import torch
from fairseq import checkpoint_utils

from ode_seq.checkpoint_files import load_checkpoint
from testkit.in_process import fairseq_trainer, run_in_process
from tests.e2e.cli import TINY_MODEL
from tests.reliability.corpus import (
    OPTIMISATION,
    QUIET_CPU,
    RK4_LEARNED,
    kill_after_update_past_checkpoint,
    model_state,
    resumable_training,
)


def _batches_per_epoch(log: str) -> int:
    return int(re.search(r"epoch 001:\s+\d+ / (\d+)", log).group(1))


def _updates_logged(log: str):
    return [(int(e), int(i)) for e, i in re.findall(r"epoch (\d+):\s+(\d+) / \d+ loss=", log)]


def test_sigkill_mid_epoch_then_restart_ends_with_the_uninterrupted_parameters(data_bin, reference_run, tmp_path):
    reference_dir, reference_log = reference_run
    per_epoch = _batches_per_epoch(reference_log)
    save = tmp_path / "ckpt"
    command = resumable_training(data_bin, save)

    kill_after_update_past_checkpoint(command)
    last = load_checkpoint(str(save / "checkpoint_last.pt"))
    position = last["extra_state"]["train_iterator"]
    resumed_from = last["optimizer_history"][-1]["num_updates"]
    assert position["epoch"] == 1 and 0 < position["iterations_in_epoch"] < per_epoch

    out = run_in_process("fairseq-train", command, check=True).stdout
    assert f"Loaded checkpoint {save}/checkpoint_last.pt (epoch 1 @ {resumed_from} updates)" in out
    # The restart continues the epoch at the next batch instead of starting it again.
    updates = _updates_logged(out)
    assert updates[0] == (1, position["iterations_in_epoch"] + 1)
    assert len(updates) == 2 * per_epoch - resumed_from

    resumed, uninterrupted = model_state(save / "checkpoint_last.pt"), model_state(reference_dir / "checkpoint_last.pt")
    assert resumed.keys() == uninterrupted.keys()
    unequal = [k for k in resumed if not torch.equal(resumed[k], uninterrupted[k])]
    assert unequal == []
    gates = [k for k in resumed if k.endswith("combiner.proj.weight")]
    assert len(gates) == 4
    assert any(not torch.equal(last["model"][k], resumed[k]) for k in gates)


def test_a_run_stopped_at_an_epoch_end_and_resumed_ends_with_the_uninterrupted_parameters(
    data_bin, reference_run, tmp_path
):
    """Resumed at epoch 2, fairseq alone would batch the sentences anew (fix resumed_batches)."""
    reference_dir, _ = reference_run
    save = tmp_path / "ckpt"
    command = resumable_training(data_bin, save)
    run_in_process("fairseq-train", [*command, "--max-epoch", "1"], check=True)
    out = run_in_process("fairseq-train", command, check=True).stdout
    assert f"Loaded checkpoint {save}/checkpoint_last.pt (epoch 2 @" in out
    resumed, uninterrupted = model_state(save / "checkpoint_last.pt"), model_state(reference_dir / "checkpoint_last.pt")
    assert [k for k in resumed if not torch.equal(resumed[k], uninterrupted[k])] == []


class SimulatedKill(BaseException):
    """Stands for SIGKILL arriving in the middle of a file copy."""


def test_kill_while_saving_leaves_the_previous_checkpoint_last_intact(data_bin, tmp_path, monkeypatch):
    save = tmp_path / "ckpt"
    trainer, epoch = fairseq_trainer(
        [
            str(data_bin),
            *RK4_LEARNED,
            *OPTIMISATION,
            *QUIET_CPU,
            "--save-interval-updates",
            "1",
            "--save-dir",
            str(save),
        ]
    )
    batches = epoch.next_epoch_itr(shuffle=False)
    trainer.train_step([next(batches)])
    checkpoint_utils.save_checkpoint(trainer.cfg.checkpoint, trainer, epoch, None)
    trainer.train_step([next(batches)])

    def copy_half_then_die(src, dst, *args, **kwargs):
        with open(src, "rb") as source, open(dst, "wb") as target:
            data = source.read()
            target.write(data[: len(data) // 2])
        raise SimulatedKill(dst)

    monkeypatch.setattr(shutil, "copyfile", copy_half_then_die)
    try:
        checkpoint_utils.save_checkpoint(trainer.cfg.checkpoint, trainer, epoch, None)
    except SimulatedKill:
        pass
    monkeypatch.undo()
    last = load_checkpoint(str(save / "checkpoint_last.pt"))
    assert last["optimizer_history"][-1]["num_updates"] in (1, 2)


def test_a_resumed_run_keeps_counting_its_patience(data_bin, tmp_path):
    """--patience 3 at lr 0, so no validation after the first is better: a run stops after epoch 4,
    also when it was first stopped by --max-epoch 2 and then resumed (fairseq alone counts anew
    from the resumed run's first validation and stops after epoch 6)."""

    def train(max_epoch: int) -> str:
        args = [str(data_bin), "--user-dir", "user_dir", "--arch", "transformer", *TINY_MODEL, *OPTIMISATION]
        args += [*QUIET_CPU, "--lr", "0", "--max-tokens", "2000", "--patience", "3", "--max-epoch", str(max_epoch)]
        return run_in_process(
            "fairseq-train", [*args, "--no-epoch-checkpoints", "--save-dir", str(tmp_path)], check=True
        ).stdout

    first, resumed = train(2), train(10)
    validated = [int(e) for e in re.findall(r"\| epoch (\d+) \| valid on", first + resumed)]
    assert validated == [1, 2, 3, 4]
    assert "early stop since valid performance hasn't improved for last 3 runs" in resumed
