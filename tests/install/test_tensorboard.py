"""TensorBoard logging: fairseq-train --tensorboard-logdir writes event files holding the training and
validation losses (tensorboardX is installed), and fairseq no longer asks for tensorboardX."""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Set

from tensorboardX.proto import event_pb2

from tests.e2e.cli import TINY_MODEL, TRANSLATION_TRAINING, run
from tests.e2e.corpus import reversal_data_bin


def scalar_tags(directory: Path) -> Set[str]:
    """Tags of the summaries in the TensorBoard event files of ``directory``. Each record of an event
    file is: length (uint64), its CRC (uint32), a serialised Event, the Event's CRC (uint32)."""
    tags = set()
    for path in directory.glob("events.out.tfevents.*"):
        data, offset = path.read_bytes(), 0
        while offset < len(data):
            (length,) = struct.unpack_from("<Q", data, offset)
            event = event_pb2.Event.FromString(data[offset + 12 : offset + 12 + length])
            tags.update(value.tag for value in event.summary.value)
            offset += 12 + length + 4
    return tags


def test_tensorboard_logdir_gets_train_and_valid_losses_and_no_tensorboardx_warning(tmp_path):
    reversal_data_bin(tmp_path, {"train": 100, "valid": 10})
    logdir = tmp_path / "tensorboard"
    result = run(
        "fairseq-train",
        [
            str(tmp_path / "bin"),
            "--arch",
            "ode_transformer_rk4_small",
            *TINY_MODEL,
            *TRANSLATION_TRAINING,
            "--lr",
            "0.003",
            "--max-tokens",
            "500",
            "--label-smoothing",
            "0.1",
            "--max-update",
            "3",
            "--log-interval",
            "1",
            "--no-save",
            "--save-dir",  # fairseq-train creates it even with --no-save
            str(tmp_path / "checkpoints"),
            "--tensorboard-logdir",
            str(logdir),
        ],
    )
    assert "tensorboardX" not in result.stdout + result.stderr
    assert {"loss", "nll_loss"} <= scalar_tags(logdir / "train_inner")
    assert {"loss", "nll_loss"} <= scalar_tags(logdir / "valid")
