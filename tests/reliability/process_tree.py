"""Long commands started with a mark in their environment, so that every process they start (children
inherit the environment, also those that leave the process group or lose their parent) can be found
in /proc afterwards; and the pipelines' command lines on the tiny Bible slice."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import psutil

from tests.e2e import cli
from tests.e2e.cli import ROOT
from tests.e2e.corpus import BIBLE_SLICE

MARK = "ODE_SEQ_TEST_PROCESS_MARK"  # read by no script: it only tags the processes of one test
TRANSLATION = Path(ROOT) / "examples" / "translation"
PREPARE_ARGS = BIBLE_SLICE
TINY_MODEL = [*cli.TINY_MODEL, "--max-tokens", "600"]
ARCH = "ode_transformer_rk4_small"


def demo_args(max_update: int, save_interval: int) -> List[str]:
    """run_bible_demo.sh's options for a tiny RK4 model on the prepared slice, on the CPU."""
    return [
        "--arch",
        ARCH,
        "--gpus",
        "0",
        *PREPARE_ARGS,
        "--max-update",
        str(max_update),
        "--save-interval-updates",
        str(save_interval),
        "--max-len-a",
        "0",
        "--max-len-b",
        "6",
        "--",
        *TINY_MODEL,
    ]


def pipeline_env(**extra: str) -> Dict[str, str]:
    """The environment of a pipeline run from this venv, one thread per process."""
    return dict(
        os.environ,
        PYTHONWARNINGS="ignore",
        OMP_NUM_THREADS="1",
        ODE_SEQ_VENV=sys.prefix,
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        **extra,
    )


STOP_SIGNALS = (signal.SIGINT, signal.SIGHUP, signal.SIGTERM)


def default_stop_signals() -> None:
    """Give the stop signals their default action, unblocked, in a child about to start, as a
    terminal would: a child inherits ignored and blocked signals from the test process (a suite
    run under ``nohup`` ignores SIGHUP, a background job SIGINT), and a shell cannot trap a
    signal that was ignored when it started."""
    for sig in STOP_SIGNALS:
        signal.signal(sig, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)


class Run:
    """A command started with a fresh mark, the stop signals at their default actions (as from a
    terminal); its standard output and error go to files in ``logs``."""

    def __init__(
        self, command: Sequence[str], logs: Path, env: Optional[Dict[str, str]] = None, new_session: bool = False
    ) -> None:
        self.mark = uuid.uuid4().hex
        logs.mkdir(parents=True, exist_ok=True)
        self.stdout, self.stderr = logs / "stdout.txt", logs / "stderr.txt"
        with open(self.stdout, "w") as out, open(self.stderr, "w") as err:
            self.process = subprocess.Popen(
                list(command),
                stdout=out,
                stderr=err,
                cwd=ROOT,
                env={**(env or pipeline_env()), MARK: self.mark},
                start_new_session=new_session,
                preexec_fn=default_stop_signals,
            )

    def ours(self) -> List[psutil.Process]:
        """The living processes (zombies excluded) that carry this run's mark."""
        found = []
        for process in psutil.process_iter():
            try:
                if process.environ().get(MARK) == self.mark and process.status() != psutil.STATUS_ZOMBIE:
                    found.append(process)
            except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
                continue
        return found

    def commands(self) -> List[str]:
        """The command lines of :meth:`ours`."""
        lines = []
        for process in self.ours():
            try:
                lines.append(" ".join(process.cmdline()))
            except psutil.NoSuchProcess:
                continue
        return lines

    def log(self) -> str:
        return self.stderr.read_text(errors="replace")

    def wait_until(self, condition: Callable[[], bool], what: str, timeout: float = 600) -> None:
        """Poll ``condition`` until it holds; fail (after stopping the run) if the run ends first."""
        deadline = time.monotonic() + timeout
        while not condition():
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.kill_group()
                raise AssertionError(
                    f"the run ended (exit {self.process.returncode}) or timed out before {what}:\n{self.log()[-3000:]}"
                )
            time.sleep(0.1)

    def running(self, *words: str) -> bool:
        """Whether one of our processes has all ``words`` in its command line."""
        return any(all(word in line for word in words) for line in self.commands())

    def kill_group(self) -> None:
        """SIGKILL to the run's process group (a crash: no process can clean up), then reap it."""
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.process.wait()

    def finish(self, timeout: float = 900) -> int:
        return self.process.wait(timeout=timeout)


def file_states(directory: Path) -> Dict[str, Tuple[int, int]]:
    """Size and modification time of every file under ``directory``."""
    states = {}
    for path in directory.rglob("*"):
        if path.is_file() and not path.is_symlink():
            stat = path.stat()
            states[str(path.relative_to(directory))] = (stat.st_size, stat.st_mtime_ns)
    return states
