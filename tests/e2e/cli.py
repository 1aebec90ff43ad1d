"""Run fairseq's and ode-seq's command-line tools as a user would, from the repository root."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Dict, List, Optional

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.dirname(sys.executable)

TINY_MODEL = [
    "--encoder-embed-dim",
    "32",
    "--decoder-embed-dim",
    "32",
    "--encoder-ffn-embed-dim",
    "64",
    "--decoder-ffn-embed-dim",
    "64",
    "--encoder-attention-heads",
    "2",
    "--decoder-attention-heads",
    "2",
    "--encoder-layers",
    "2",
    "--decoder-layers",
    "2",
]


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
