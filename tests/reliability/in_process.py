"""Run a tool's entry point in this process, as its console script would run it (the function
behind ``fairseq-generate`` etc., or ``main(argv)`` of an ode-seq tool), without the seconds of
interpreter and import start-up that a subprocess costs."""

from __future__ import annotations

import importlib
import io
import subprocess
import sys
from contextlib import chdir, redirect_stderr, redirect_stdout
from typing import Callable, List, Optional
from unittest import mock

from tests.e2e.cli import ROOT

# The console scripts' entry points (fairseq's setup.py).
CONSOLE_SCRIPTS = {
    "fairseq-generate": "fairseq_cli.generate",
    "fairseq-interactive": "fairseq_cli.interactive",
    "fairseq-eval-lm": "fairseq_cli.eval_lm",
    "fairseq-train": "fairseq_cli.train",
    "fairseq-preprocess": "fairseq_cli.preprocess",
}


def entry_point(tool: str, args: List[str]) -> Callable[[], Optional[int]]:
    """``tool`` (a console script above, or 'python' with ``-m MODULE ARGS``) as a call."""
    if tool == "python":
        assert args[0] == "-m", args
        return lambda: importlib.import_module(args[1]).main(args[2:])
    cli_main = importlib.import_module(CONSOLE_SCRIPTS[tool]).cli_main

    def call() -> None:
        with mock.patch.object(sys, "argv", [tool, *args]):
            cli_main()

    return call


def run_in_process(tool: str, args: List[str], stdin: str = "") -> subprocess.CompletedProcess:
    """The exit status, standard output and standard error the console script would give: an
    uncaught exception is status 1 with its last line ``module.Type: message`` on stderr."""
    out, err = io.StringIO(), io.StringIO()
    call = entry_point(tool, args)
    with chdir(ROOT), redirect_stdout(out), redirect_stderr(err), mock.patch.object(sys, "stdin", io.StringIO(stdin)):
        try:
            status = call() or 0
        except SystemExit as stop:
            status = stop.code if isinstance(stop.code, int) else 1
        except Exception as error:  # what the interpreter would print after the traceback
            status = 1
            err.write(f"{type(error).__module__}.{type(error).__name__}: {error}\n")
    return subprocess.CompletedProcess([tool, *args], status, out.getvalue(), err.getvalue())
