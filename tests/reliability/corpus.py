"""fairseq command lines and process helpers shared by the reliability tests."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import threading
from pathlib import Path
from typing import Dict, List, Sequence

import torch

from ode_seq.checkpoint_files import load_checkpoint
from tests.e2e.cli import BIN, ROOT, TINY_MODEL

# An RK4 encoder-decoder with learned per-token stage gates, as small as fairseq allows.
RK4_LEARNED = [
    "--user-dir",
    "user_dir",
    "--arch",
    "ode_transformer_rk4_encdec_small",
    *TINY_MODEL,
    "--ode-coefficients",
    "learned",
    "--share-all-embeddings",
]
OPTIMISATION = [
    "--optimizer",
    "adam",
    "--lr",
    "0.003",
    "--max-tokens",
    "100",
    "--criterion",
    "label_smoothed_cross_entropy",
    "--label-smoothing",
    "0.1",
]
QUIET_CPU = [
    "--cpu",
    "--num-workers",
    "0",
    "--log-format",
    "simple",
    "--log-interval",
    "1",
    "--no-progress-bar",
]
NO_DROPOUT = ["--dropout", "0", "--attention-dropout", "0", "--activation-dropout", "0"]


def resumable_training(data_bin: Path, save_dir: Path) -> List[str]:
    """Two epochs of the RK4 learned-gate model, dropout on, a checkpoint every 5 updates."""
    return [
        str(data_bin),
        *RK4_LEARNED,
        *OPTIMISATION,
        *QUIET_CPU,
        "--seed",
        "7",
        "--max-epoch",
        "2",
        "--save-interval-updates",
        "5",
        "--keep-interval-updates",
        "1",
        "--no-epoch-checkpoints",
        "--disable-validation",
        "--save-dir",
        str(save_dir),
    ]


def model_state(path: Path) -> Dict[str, torch.Tensor]:
    """The parameters saved in a fairseq checkpoint, loaded with safe unpickling."""
    return load_checkpoint(str(path))["model"]


def final_error(output: str) -> str:
    """The error a tool ended with: its last exception line (or ``[prog: ]error:`` line) onwards."""
    lines = output.splitlines()
    starts = [i for i, line in enumerate(lines) if re.match(r"[\w.]*(Error|Exception)\b|([\w. -]+: )?error:", line)]
    return "\n".join(lines[starts[-1] :]) if starts else ""


def tool_env() -> Dict[str, str]:
    """The environment :func:`tests.e2e.cli.run` gives tools, with unbuffered output."""
    return dict(os.environ, PYTHONWARNINGS="ignore", OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")


def start(tool: str, args: Sequence[str], log: Path) -> subprocess.Popen:
    """Start a console script of the venv with stdout and stderr going to ``log``."""
    with open(log, "w") as out:
        return subprocess.Popen(
            [os.path.join(BIN, tool), *args], stdout=out, stderr=subprocess.STDOUT, cwd=ROOT, env=tool_env()
        )


def kill_after_update_past_checkpoint(args: Sequence[str], timeout: float = 180.0) -> List[str]:
    """Run fairseq-train and SIGKILL it once it logs an update after a mid-epoch checkpoint.

    Returns the log lines read before the kill. Fails if training ends first.
    """
    process = subprocess.Popen(
        [os.path.join(BIN, "fairseq-train"), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=ROOT,
        env=tool_env(),
    )
    watchdog = threading.Timer(timeout, process.kill)
    watchdog.start()
    lines: List[str] = []
    saved_at = None
    try:
        for line in process.stdout:
            lines.append(line)
            saved = re.search(r"Saved checkpoint \S*checkpoint_\d+_(\d+)\.pt", line)
            if saved:
                saved_at = int(saved.group(1))
            update = re.search(r"num_updates=(\d+)", line)
            if saved_at is not None and update and int(update.group(1)) > saved_at:
                process.send_signal(signal.SIGKILL)
                break
    finally:
        watchdog.cancel()
        process.wait()
        process.stdout.close()
    assert process.returncode == -signal.SIGKILL, (
        f"fairseq-train was not killed mid-epoch (exit {process.returncode}):\n{''.join(lines[-20:])}"
    )
    return lines
