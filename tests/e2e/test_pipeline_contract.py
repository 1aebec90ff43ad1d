"""The pipeline contract of every entry script under examples/ (see examples/lib.sh): `--help`
prints the usage and exits 0; an unknown option, or an old environment-variable interface, is a
usage error (exit 2) naming the fix; the scripts run in the project's virtual environment or say
how to make one; and every command line in the examples' READMEs uses only options its script has.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Optional

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = REPO_ROOT / "examples"
SCRIPTS = [
    "translation/run_bible_demo.sh",
    "translation/train_bible.sh",
    "translation/evaluate.sh",
    "translation/score.sh",
    "translation/prepare_bible.sh",
    "translation/prepare_parallel.sh",
    "translation/prepare_wmt14.sh",
    "translation/train_wmt14.sh",
    "translation/quality_study.sh",
    "translation/demo_sweep.sh",
    "summarization/prepare.sh",
    "summarization/train.sh",
    "summarization/evaluate.sh",
    "summarization/recipe.sh",
    "gec/prepare.sh",
    "gec/train.sh",
    "gec/evaluate.sh",
    "distillation/run.sh",
    "distillation/step_counts.sh",
    "step_adaptation/run.sh",
]
# Arguments a script needs before it reaches an unknown option (score.sh hands all to argparse).
REQUIRED: Dict[str, List[str]] = {"translation/score.sh": ["--hyp", "h", "--ref", "r", "--lang", "es"]}
# An old environment-variable interface of each pipeline and what replaced it.
OLD_VARIABLES = [
    ("translation/run_bible_demo.sh", "ODE_SEQ_ARCH", "--arch"),
    ("translation/train_bible.sh", "ODE_SEQ_ARCH", "--arch"),
    ("translation/quality_study.sh", "ODE_SEQ_ARCH", "--arch"),
    ("translation/score.sh", "PYTHON", "ODE_SEQ_VENV"),
    ("summarization/prepare.sh", "DATA_DIR", "--work-dir"),
    ("summarization/prepare.sh", "SPM_VOCAB", "--vocab-size"),
    ("summarization/train.sh", "METHOD", "--method"),
    ("summarization/train.sh", "GPUS", "--gpus"),
    ("summarization/evaluate.sh", "CHECKPOINT", "--checkpoint"),
    ("gec/prepare.sh", "TRAIN_M2", "--train-m2"),
    ("gec/train.sh", "ARCH", "--arch"),
    ("gec/train.sh", "CPU", "--gpus 0"),
    ("gec/train.sh", "EXTRA_ARGS", "options after --"),
    ("gec/evaluate.sh", "ERRANT", "--errant"),
]


def run(
    script: Path, *args: str, env: Optional[Dict[str, str]] = None, cwd: Path = REPO_ROOT
) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", str(script), *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env if env is not None else dict(os.environ),
        timeout=120,
    )


def test_the_list_holds_every_entry_script_and_each_is_executable():
    assert sorted(str(p.relative_to(EXAMPLES)) for p in EXAMPLES.glob("*/*.sh")) == sorted(SCRIPTS)
    assert [script for script in SCRIPTS if not os.access(EXAMPLES / script, os.X_OK)] == []


@pytest.mark.parametrize("script", SCRIPTS)
def test_help_prints_the_usage_and_exits_0(script):
    result = run(EXAMPLES / script, "--help")
    assert result.returncode == 0, result.stderr
    assert f"Usage: {Path(script).name}" in result.stdout
    assert not result.stdout.startswith(("#", "!")), "the header is printed without comment marks"


@pytest.mark.parametrize("script", SCRIPTS)
def test_an_unknown_option_is_a_usage_error_naming_it(script, tmp_path):
    result = run(EXAMPLES / script, *REQUIRED.get(script, []), "--no-such-option", cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert "error:" in result.stderr and "--no-such-option" in result.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("script, variable, replacement", OLD_VARIABLES)
def test_an_old_environment_variable_is_a_usage_error_naming_its_flag(script, variable, replacement):
    result = run(EXAMPLES / script, env=dict(os.environ, **{variable: "1"}))
    assert result.returncode == 2, result.stderr
    assert (
        f"{Path(script).name}: error: the environment variable {variable} is no longer read; "
        f"use {replacement} instead" in result.stderr
    )


@pytest.mark.parametrize("option", ["--max-update", "--gpus"])
def test_a_bad_number_is_a_usage_error(option):
    result = run(EXAMPLES / "translation" / "train_bible.sh", option, "x")
    assert result.returncode == 2
    assert f"train_bible.sh: error: {option} must be a whole number, got 'x'" in result.stderr


def test_a_missing_option_value_is_a_usage_error():
    result = run(EXAMPLES / "gec" / "train.sh", "--arch")
    assert result.returncode == 2 and "train.sh: error: option --arch needs a value" in result.stderr


@pytest.mark.parametrize(
    "script, args",
    [
        ("translation/train_bible.sh", ["--max-update", "1"]),
        ("translation/score.sh", ["--hyp", "h", "--ref", "r", "--lang", "es"]),
        ("gec/train.sh", []),
    ],
)
def test_a_missing_odeseq_venv_is_a_clear_error(script, args, tmp_path):
    env = dict(os.environ, ODE_SEQ_VENV=str(tmp_path / "missing"))
    result = run(EXAMPLES / script, *args, env=env)
    assert result.returncode == 1
    assert f"ODE_SEQ_VENV={tmp_path / 'missing'} holds no bin/python; run bash scripts/setup.sh first" in result.stderr


@pytest.fixture
def fake_root(tmp_path) -> Path:
    """A repository root holding only examples/lib.sh (and scripts/supervise.sh, which it sources)
    and a probe script that prints which python use_project_python chose."""
    root = tmp_path / "repo"
    (root / "examples" / "probe").mkdir(parents=True)
    (root / "scripts").mkdir()
    shutil.copy(EXAMPLES / "lib.sh", root / "examples" / "lib.sh")
    shutil.copy(REPO_ROOT / "scripts" / "supervise.sh", root / "scripts" / "supervise.sh")
    (root / "examples" / "probe" / "probe.sh").write_text(
        'source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"\nuse_project_python\ncommand -v python\n'
    )
    return root


def probe(root: Path, path: str, **env: str) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if k not in ("ODE_SEQ_VENV", "PYTHONPATH")}
    return run(root / "examples" / "probe" / "probe.sh", env={**clean, "PATH": path, **env})


def broken_python(directory: Path) -> str:
    """A PATH whose first python cannot import anything (standing in for a bare system python)."""
    directory.mkdir()
    (directory / "python").write_text("#!/bin/sh\nexit 1\n")
    (directory / "python").chmod(0o755)
    return f"{directory}{os.pathsep}/usr/bin{os.pathsep}/bin"


VENV_BIN = Path(sys.executable).parent


def test_the_repository_venv_goes_first_on_path(fake_root, tmp_path):
    (fake_root / ".venv").symlink_to(Path(sys.prefix))
    result = probe(fake_root, broken_python(tmp_path / "bin"))
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(fake_root / ".venv" / "bin" / "python")


def test_odeseq_venv_names_the_environment(fake_root, tmp_path):
    result = probe(fake_root, broken_python(tmp_path / "bin"), ODE_SEQ_VENV=sys.prefix)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(Path(sys.prefix) / "bin" / "python")


def test_without_a_venv_a_python_that_imports_fairseq_and_odeseq_is_used(fake_root):
    path = f"{VENV_BIN}{os.pathsep}/usr/bin{os.pathsep}/bin"
    result = probe(fake_root, path, PYTHONPATH=str(REPO_ROOT))
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(VENV_BIN / "python")


def test_without_a_venv_or_a_usable_python_the_error_says_how_to_set_up(fake_root, tmp_path):
    result = probe(fake_root, broken_python(tmp_path / "bin"))
    assert result.returncode == 1
    assert f"probe.sh: error: no virtual environment at {fake_root / '.venv'}" in result.stderr
    assert "run bash scripts/setup.sh first (or set ODE_SEQ_VENV)" in result.stderr


def readme_commands() -> List[tuple]:
    """(README, script, arguments) of every command line in a code block of an examples README."""
    commands = []
    for readme in sorted(EXAMPLES.glob("*/README.md")):
        text = re.sub(r"\\\n\s*", " ", readme.read_text(encoding="utf-8"))
        blocks = re.findall(r"```[a-z]*\n(.*?)```", text, re.S)
        for line in (line for block in blocks for line in block.splitlines()):
            match = re.search(r"(?:bash )?(examples/\w+/\w+\.sh)(.*)", line.split("#")[0])
            if match:
                commands.append((readme.parent.name, line.strip(), match.group(1), match.group(2)))
    return commands


@pytest.mark.parametrize("readme, line, script, args", readme_commands())
def test_readme_command_lines_use_only_their_scripts_options(readme, line, script, args):
    prefix = line.split(script)[0]
    assignments = re.findall(r"\b([A-Z_0-9]+)=", prefix)
    assert set(assignments) <= {"OMP_NUM_THREADS"}, f"{line}: environment variables are not read"
    words = shlex.split(args.replace("$", ""))
    options = words[: words.index("--")] if "--" in words else words
    usage = run(REPO_ROOT / script, "--help").stdout
    for option in (word for word in options if word.startswith("--")):
        assert re.search(rf"{re.escape(option)}\b", usage), f"{line}: {option} is not in {script} --help"


def test_every_example_readme_shows_a_command_line():
    assert {readme for readme, *_ in readme_commands()} == {p.parent.name for p in EXAMPLES.glob("*/README.md")}


def lib_call(*lines: str) -> subprocess.CompletedProcess:
    """Run LINES in a bash script that sources examples/lib.sh under the pipelines' strict mode."""
    script = "\n".join(["set -euo pipefail", f"source {shlex.quote(str(EXAMPLES / 'lib.sh'))}", *lines])
    return subprocess.run(["bash", "-c", script, "probe.sh"], capture_output=True, text=True, timeout=60)


def test_a_content_id_follows_the_contents_not_the_place(tmp_path):
    for directory in ("a", "b"):
        (tmp_path / directory).mkdir()
        (tmp_path / directory / "x.txt").write_text("one\n")
        (tmp_path / directory / "y.txt").write_text("two\n")
    (tmp_path / "b" / "renamed.txt").write_text("two\n")
    (tmp_path / "changed.txt").write_text("two!\n")
    ids = lib_call(
        *(
            f"content_id {tmp_path}/{first} {tmp_path}/{second}"
            for first, second in [
                ("a/x.txt", "a/y.txt"),
                ("b/x.txt", "b/renamed.txt"),
                ("a/y.txt", "a/x.txt"),
                ("a/x.txt", "changed.txt"),
            ]
        )
    )
    assert ids.returncode == 0, ids.stderr
    same, moved, swapped, changed = ids.stdout.split()
    assert same == moved and same.startswith("sha256:")
    assert len({same, swapped, changed}) == 3


def test_an_unreadable_input_stops_the_script_before_its_settings_are_recorded(tmp_path):
    result = lib_call(f'ID="$(content_id {tmp_path}/missing.txt)"', "echo recorded")
    assert result.returncode == 1
    assert f"probe.sh: error: cannot read {tmp_path}/missing.txt" in result.stderr
    assert "recorded" not in result.stdout


def test_a_data_bin_without_the_subset_is_named(tmp_path):
    (tmp_path / "dict.en.txt").write_text("a 1\n")
    (tmp_path / "valid.en-es.en.bin").write_bytes(b"\0")
    assert lib_call(f"data_bin_id {tmp_path} valid").returncode == 0
    result = lib_call(f"data_bin_id {tmp_path} test")
    assert result.returncode == 1
    assert f"{tmp_path} holds no binarised subset 'test' (no test.* files)" in result.stderr


def test_a_path_is_recorded_relative_to_its_recording_directory(tmp_path):
    result = lib_call(f"path_from {tmp_path}/run/eval-test {tmp_path}/run")
    assert result.stdout.strip() == ".."
