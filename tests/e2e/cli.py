"""Run fairseq's and ode-seq's command-line tools as a user would, from the repository root."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Dict, List, Optional

from testkit.in_process import run_in_process

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.dirname(sys.executable)


def size_options(embed_dim: int, ffn_dim: int, heads: int, layers: int) -> List[str]:
    """fairseq-train's size options of an encoder-decoder, the same on both sides."""
    sizes = {"embed-dim": embed_dim, "ffn-embed-dim": ffn_dim, "attention-heads": heads, "layers": layers}
    return [arg for side in ("encoder", "decoder") for name, n in sizes.items() for arg in (f"--{side}-{name}", str(n))]


TINY_MODEL = size_options(embed_dim=32, ffn_dim=64, heads=2, layers=2)
# fairseq's own Transformer, pre-norm (the layers of an Euler ODE model), at the tiny size.
PRE_NORM = ["--encoder-normalize-before", "--decoder-normalize-before"]
PRE_NORM_TRANSFORMER = ["--arch", "transformer", *PRE_NORM, *TINY_MODEL]
# A run's seed, a plain log, no data-loading workers: every fairseq-train run of the tests.
PLAIN_RUN = ["--seed", "1", "--no-progress-bar", "--log-format", "simple", "--num-workers", "0"]
# The tiny translation trainings: the plugin, Adam, label-smoothed cross-entropy, shared embeddings.
TRANSLATION_TRAINING = [
    "--user-dir",
    "user_dir",
    "--optimizer",
    "adam",
    "--criterion",
    "label_smoothed_cross_entropy",
    "--share-all-embeddings",
    *PLAIN_RUN,
]
# ... at learning rate 0.003, label smoothing 0.1, batches of 1000 tokens (the end-to-end runs).
TRAIN = [*TRANSLATION_TRAINING, "--lr", "0.003", "--label-smoothing", "0.1", "--max-tokens", "1000"]


def logged_updates(updates: int, save_dir: os.PathLike) -> List[str]:
    """fairseq-train's options of a run of ``updates`` updates, each logged, without validation,
    keeping its last checkpoint in ``save_dir``."""
    logging = ["--log-interval", "1", "--no-epoch-checkpoints", "--disable-validation"]
    return ["--max-update", str(updates), *logging, "--save-dir", str(save_dir)]


def subset_args(data_bin: os.PathLike, checkpoint: os.PathLike, subset: str, *options: str) -> List[str]:
    """fairseq-generate's or fairseq-eval-lm's command line: ``checkpoint``, with the plugin, on
    ``subset`` of ``data_bin``."""
    return [str(data_bin), "--user-dir", "user_dir", "--path", str(checkpoint), "--gen-subset", subset, *options]


def export(*args: str) -> str:
    """ode-seq export's standard output: its entry point, in this process."""
    return run_in_process("python", ["-m", "ode_seq.cli.export", *args], check=True).stdout


def run_pipeline(script: os.PathLike, *args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    """Run a pipeline script of examples/ from the repository root as a user would: this
    environment's tools first on PATH, one intra-op thread, no Python warnings."""
    env = dict(os.environ, PYTHONWARNINGS="ignore", OMP_NUM_THREADS="1", PATH=f"{BIN}{os.pathsep}{os.environ['PATH']}")
    return subprocess.run(
        ["bash", str(script), *args], capture_output=True, text=True, env=env, cwd=ROOT, timeout=timeout
    )


def run(
    tool: str,
    args: List[str],
    stdin: Optional[str] = None,
    check: bool = True,
    cwd: str = ROOT,
    timeout: Optional[float] = None,
    env: Optional[Dict[str, str]] = None,
) -> subprocess.CompletedProcess:
    """Run ``tool`` (a console script of the venv, or 'python') and return its result; a tool
    still running after ``timeout`` seconds is killed and raises TimeoutExpired. ``env``: variables
    set on top of this process's environment."""
    exe = sys.executable if tool == "python" else os.path.join(BIN, tool)
    env = dict(os.environ, PYTHONWARNINGS="ignore", OMP_NUM_THREADS="1", **(env or {}))
    result = subprocess.run(
        [exe, *args], input=stdin, capture_output=True, text=True, cwd=cwd, env=env, timeout=timeout
    )
    if check and result.returncode != 0:
        raise AssertionError(f"{tool} {' '.join(args)} failed ({result.returncode}):\n{result.stderr[-4000:]}")
    return result
