"""fairseq's tools in this process: fairseq-train's configuration and Trainer built from its
command line (the GPU run's checks and study, and the reliability tests), and any tool's entry
point run as its console script would run it, without the seconds of interpreter and import
start-up that a subprocess costs (the tests).

    trainer, epoch = fairseq_trainer([data_bin, "--user-dir", PLUGIN_DIR, "--arch", "ode_transformer_rk4", ...])
    result = run_in_process("fairseq-generate", [data_bin, "--path", checkpoint, "--beam", "2"])
"""

from __future__ import annotations

import importlib
import io
import logging
import os
import subprocess
import sys
from contextlib import chdir, contextmanager, redirect_stderr, redirect_stdout
from typing import Any, Callable, Iterator, List, Optional, Sequence, TextIO, Tuple
from unittest import mock

import torch
from fairseq import checkpoint_utils, options, tasks
from fairseq.data.iterators import EpochBatchIterator
from fairseq.dataclass.utils import convert_namespace_to_omegaconf
from fairseq.trainer import Trainer
from omegaconf import DictConfig, open_dict

from ode_seq.fairseq_fixes import save_dir_lock

# The checkout: the folder holding the ode_seq and user_dir packages.
PACKAGES = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PLUGIN_DIR = os.path.join(PACKAGES, "user_dir")


def parse_training_args(args: Sequence[str]) -> DictConfig:
    """fairseq-train's configuration for ``args``, parsed from :data:`PACKAGES` (so that
    ``--user-dir user_dir`` names ode-seq's plugin, and other relative paths are relative to it)."""
    with chdir(PACKAGES):
        namespace = options.parse_args_and_arch(options.get_training_parser(), input_args=list(args))
    return convert_namespace_to_omegaconf(namespace)


def fairseq_trainer(args: Sequence[str], **common: Any) -> Tuple[Trainer, EpochBatchIterator]:
    """The Trainer fairseq-train would build from ``args`` (``common`` overrides ``cfg.common``
    after parsing) and its epoch iterator, positioned before epoch 1."""
    cfg = parse_training_args(args)
    with open_dict(cfg):
        for key, value in common.items():
            setattr(cfg.common, key, value)
    task = tasks.setup_task(cfg.task)
    task.load_dataset(cfg.dataset.train_subset)
    trainer = Trainer(cfg, task, task.build_model(cfg.model), task.build_criterion(cfg.criterion))
    return trainer, trainer.get_train_iterator(epoch=1)


# The console scripts' entry points (fairseq's setup.py).
CONSOLE_SCRIPTS = {
    "fairseq-generate": "fairseq_cli.generate",
    "fairseq-interactive": "fairseq_cli.interactive",
    "fairseq-eval-lm": "fairseq_cli.eval_lm",
    "fairseq-train": "fairseq_cli.train",
    "fairseq-preprocess": "fairseq_cli.preprocess",
}
# The log lines of fairseq's tools, as their logging.basicConfig writes them to standard output.
LOG_FORMAT = "%(asctime)s | %(levelname)s | %(name)s | %(message)s"


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


@contextmanager
def logging_to(stream: TextIO) -> Iterator[None]:
    """The log records of level ``LOGLEVEL`` (fairseq's default: INFO) and above go to ``stream``
    alone, formatted as fairseq's tools format them: a console script's one log handler (a record
    that cannot be formatted is reported on stderr, and the run goes on)."""
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter(LOG_FORMAT))
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    root.handlers = [handler]
    root.setLevel(os.environ.get("LOGLEVEL", "INFO").upper())
    try:
        yield
    finally:
        root.handlers = handlers
        root.setLevel(level)


def forget_earlier_runs() -> None:
    """Clear what fairseq keeps of a run in attributes of its functions, which a new process starts
    without: the best validation value that decides checkpoint_best.pt (``save_checkpoint.best``)
    and fairseq-train's patience count (``should_stop_early.best``, ``.num_runs``)."""
    holders = [checkpoint_utils.save_checkpoint]
    if "fairseq_cli.train" in sys.modules:
        holders.append(sys.modules["fairseq_cli.train"].should_stop_early)
    for function in holders:
        for name in ("best", "num_runs"):
            if hasattr(function, name):
                delattr(function, name)


@contextmanager
def releasing_save_dir_locks() -> Iterator[None]:
    """The save-directory locks a run takes (fix save_dir_lock holds them for the rest of the
    process's life) are released when it ends, as its process's exit releases them."""
    before = save_dir_lock.locked_save_dirs()
    try:
        yield
    finally:
        save_dir_lock.release_save_dir_locks(keep=before)


@contextmanager
def one_torch_thread() -> Iterator[None]:
    """torch on one intra-op thread, as the tests run the console scripts (``OMP_NUM_THREADS=1``)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def run_in_process(tool: str, args: List[str], stdin: str = "", check: bool = False) -> subprocess.CompletedProcess:
    """The exit status, standard output (with the log) and standard error the console script would
    give, run from :data:`PACKAGES` on one torch thread as in a process of its own
    (:func:`forget_earlier_runs`, :func:`releasing_save_dir_locks`): an uncaught exception is status
    1 with its last line ``module.Type: message`` on stderr (a message only its cause holds needs the
    console script). ``check``: fail, with the end of stderr, unless the status is 0."""
    out, err = io.StringIO(), io.StringIO()
    call = entry_point(tool, args)
    forget_earlier_runs()
    with (
        releasing_save_dir_locks(),
        one_torch_thread(),
        chdir(PACKAGES),
        redirect_stdout(out),
        redirect_stderr(err),
        mock.patch.object(sys, "stdin", io.StringIO(stdin)),
        logging_to(out),
    ):
        try:
            status = call() or 0
        except SystemExit as stop:
            status = stop.code if isinstance(stop.code, int) else 1
        except Exception as error:  # what the interpreter would print after the traceback
            status = 1
            err.write(f"{type(error).__module__}.{type(error).__name__}: {error}\n")
    if check and status != 0:
        raise AssertionError(f"{tool} {' '.join(args)} failed ({status}):\n{err.getvalue()[-4000:]}")
    return subprocess.CompletedProcess([tool, *args], status, out.getvalue(), err.getvalue())
