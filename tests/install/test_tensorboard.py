"""TensorBoard logging: fairseq-train --tensorboard-logdir writes event files holding the training and
validation losses (tensorboardX is installed), and fairseq no longer asks for tensorboardX."""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Set

from tensorboardX.proto import event_pb2

from tests.e2e.cli import TINY_MODEL, run
from tests.e2e.corpus import preprocess, write_reversal_corpus


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
    write_reversal_corpus(tmp_path, {"train": 100, "valid": 10})
    preprocess(tmp_path, tmp_path / "bin", splits=("train", "valid"))
    logdir = tmp_path / "tensorboard"
    result = run(
        "fairseq-train",
        [
            str(tmp_path / "bin"),
            "--user-dir",
            "user_dir",
            "--arch",
            "ode_transformer_rk4_small",
            *TINY_MODEL,
            "--optimizer",
            "adam",
            "--lr",
            "0.003",
            "--max-tokens",
            "500",
            "--criterion",
            "label_smoothed_cross_entropy",
            "--label-smoothing",
            "0.1",
            "--share-all-embeddings",
            "--seed",
            "1",
            "--max-update",
            "3",
            "--log-interval",
            "1",
            "--log-format",
            "simple",
            "--num-workers",
            "0",
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
