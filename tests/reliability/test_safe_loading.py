"""Checkpoints load with torch's safe (``weights_only``) unpickler, and a checkpoint carrying a
pickled call is refused before the call runs, by every tool that opens checkpoints."""

from __future__ import annotations

import io
import os
import pickle
import re
import shlex
import zipfile
from pathlib import Path

import pytest
import torch

from ode_seq.checkpoint_files import load_checkpoint
from testkit.in_process import run_in_process
from tests.e2e.cli import ROOT, TINY_MODEL, run, subset_args
from tests.e2e.corpus import SIZES
from tests.reliability.corpus import OPTIMISATION, QUIET_CPU, RK4_LEARNED, final_error

# The code a hostile checkpoint would run: os.system resolves to posix.system in the pickle.
REFUSED_GLOBAL = f"{os.system.__module__}.system"


class RunsShellCommand:
    """Pickles as ``os.system(command)``: unpickling it runs the command."""

    def __init__(self, command: str) -> None:
        self.command = command

    def __reduce__(self):
        return os.system, (self.command,)


def write_hostile_checkpoint(source: Path, path: Path, marker: Path) -> None:
    """``source``'s checkpoint with a first entry that creates ``marker`` when unpickled."""
    state = load_checkpoint(str(source))
    torch.save({"payload": RunsShellCommand(f"touch {shlex.quote(str(marker))}"), **state}, path)


class _UnsafeUnpickler(pickle.Unpickler):
    """Plain pickle with torch's tensor rebuilding stubbed out: runs every other global."""

    def find_class(self, module: str, name: str):
        if module.startswith("torch"):
            return lambda *args, **kwargs: None
        return super().find_class(module, name)

    def persistent_load(self, pid):
        return None


@pytest.fixture(scope="module")
def ode_checkpoint(reference_run) -> Path:
    return reference_run[0] / "checkpoint_last.pt"


@pytest.fixture(scope="module")
def transformer_checkpoint(data_bin, tmp_path_factory) -> Path:
    """fairseq's own ``transformer``, trained for two updates."""
    save = tmp_path_factory.mktemp("transformer")
    run_in_process(
        "fairseq-train",
        [
            str(data_bin),
            "--user-dir",
            "user_dir",
            "--arch",
            "transformer",
            *TINY_MODEL,
            *OPTIMISATION,
            *QUIET_CPU,
            "--max-update",
            "2",
            "--disable-validation",
            "--no-epoch-checkpoints",
            "--save-dir",
            str(save),
        ],
        check=True,
    )
    return save / "checkpoint_last.pt"


@pytest.mark.parametrize("kind", ["ode", "transformer"])
def test_checkpoint_translates_in_fairseq_generate_with_safe_loading(
    kind, data_bin, ode_checkpoint, transformer_checkpoint
):
    path = ode_checkpoint if kind == "ode" else transformer_checkpoint
    assert load_checkpoint(str(path))["model"]  # only tensors and allow-listed types inside
    out = run_in_process(
        "fairseq-generate", subset_args(data_bin, path, "valid", "--beam", "2", "--max-tokens", "1000"), check=True
    )
    assert len(re.findall(r"^H-\d+\t", out.stdout, re.M)) == SIZES["valid"]


def test_no_project_code_turns_safe_loading_off():
    unsafe = re.compile(r"weights_only\s*=\s*False|TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD|pickle\.loads?\(")
    offenders = []
    for top in ("ode_seq", "user_dir", "testkit", "scripts", "examples", "benchmarks"):
        for directory, _, files in os.walk(os.path.join(ROOT, top)):
            for name in files:
                if name.endswith((".py", ".sh")):
                    path = os.path.join(directory, name)
                    with open(path, encoding="utf-8") as f:
                        offenders += [f"{path}:{i}" for i, line in enumerate(f, 1) if unsafe.search(line)]
    assert offenders == []


def test_hostile_checkpoint_runs_its_command_when_unpickled_unsafely(ode_checkpoint, tmp_path):
    """The control: without safe loading the payload does run (so the refusals below mean it)."""
    marker = tmp_path / "ran"
    write_hostile_checkpoint(ode_checkpoint, tmp_path / "hostile.pt", marker)
    with zipfile.ZipFile(tmp_path / "hostile.pt") as archive:
        data = next(archive.read(n) for n in archive.namelist() if n.endswith("/data.pkl"))
    _UnsafeUnpickler(io.BytesIO(data)).load()
    assert marker.exists()


def _command(tool: str, data_bin: Path, hostile: Path, tmp_path: Path):
    """(console script, arguments, stdin, output the tool must not write) for each loader."""
    if tool == "fairseq-generate":
        return (
            tool,
            [str(data_bin), "--user-dir", "user_dir", "--path", str(hostile), "--gen-subset", "valid"],
            None,
            None,
        )
    if tool == "fairseq-interactive":
        return (
            tool,
            [
                str(data_bin),
                "--user-dir",
                "user_dir",
                "--path",
                str(hostile),
                "--source-lang",
                "src",
                "--target-lang",
                "tgt",
            ],
            "w1 w2 w3\n",
            None,
        )
    if tool == "fairseq-train":
        save = tmp_path / "resumed"
        return (
            tool,
            [
                str(data_bin),
                *RK4_LEARNED,
                *OPTIMISATION,
                *QUIET_CPU,
                "--max-update",
                "1",
                "--save-dir",
                str(save),
                "--restore-file",
                str(hostile),
            ],
            None,
            save / "checkpoint_last.pt",
        )
    output = tmp_path / "averaged.pt"
    return (
        "python",
        ["-m", "ode_seq.cli.average", "--inputs", str(hostile), str(hostile), "--output", str(output)],
        None,
        output,
    )


LOADERS = ["fairseq-generate", "fairseq-interactive", "fairseq-train", "average_checkpoints"]


@pytest.fixture(scope="module")
def refusals(data_bin, ode_checkpoint, tmp_path_factory):
    """Each loader run once on its own hostile checkpoint: tool -> (result, checkpoint, marker, output)."""
    results = {}

    def refusal(tool: str):
        if tool not in results:
            tmp = tmp_path_factory.mktemp(tool.replace("-", "_"))
            hostile, marker = tmp / "hostile.pt", tmp / "payload_ran"
            write_hostile_checkpoint(ode_checkpoint, hostile, marker)
            exe, args, stdin, output = _command(tool, data_bin, hostile, tmp)
            results[tool] = (run(exe, args, stdin=stdin, check=False), hostile, marker, output)
        return results[tool]

    return refusal


@pytest.mark.parametrize("tool", LOADERS)
def test_hostile_checkpoint_is_refused_before_its_code_runs(tool, refusals):
    result, _, marker, output = refusals(tool)
    assert result.returncode != 0
    assert not marker.exists()
    assert output is None or not output.exists()


@pytest.mark.parametrize("tool", ["fairseq-generate", "fairseq-interactive", "fairseq-train", "average_checkpoints"])
def test_hostile_checkpoint_error_names_the_file_and_the_refused_type(tool, refusals):
    result, hostile, _, _ = refusals(tool)
    error = final_error(result.stderr)
    assert str(hostile) in error
    assert REFUSED_GLOBAL in error
