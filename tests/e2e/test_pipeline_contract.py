"""The pipeline contract of every entry script under examples/ (see examples/lib.sh): `--help`
prints the usage and exits 0; an unknown option, or an obsolete ODE_SEQ_* variable, is a usage
error (exit 2) naming the fix; no generic environment name (PYTHON, ARCH, CPU, BEAM, …) changes what
a script does, and OMP_NUM_THREADS is honoured; the scripts run in the project's virtual environment
or say how to make one; and every command line in the examples' READMEs uses only options its script
has.
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
    "language_modeling/prepare.sh",
    "language_modeling/train.sh",
    "language_modeling/evaluate.sh",
    "language_modeling/sample.sh",
    "language_modeling/demo.sh",
    "language_modeling/study.sh",
    "transformers/demo.sh",
]
# Arguments a script needs before it reaches an unknown option (score.sh hands all to argparse).
REQUIRED: Dict[str, List[str]] = {"translation/score.sh": ["--hyp", "h", "--ref", "r", "--lang", "es"]}
# The obsolete ODE_SEQ_* settings and what replaced them: still refused, with the fix.
OLD_VARIABLES = [
    ("translation/run_bible_demo.sh", "ODE_SEQ_ARCH", "--arch"),
    ("translation/train_bible.sh", "ODE_SEQ_ARCH", "--arch"),
    ("translation/quality_study.sh", "ODE_SEQ_ARCH", "--arch"),
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
def test_an_obsolete_odeseq_variable_is_a_usage_error_naming_its_flag(script, variable, replacement):
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


GPU_DEVICE_FILES = ["/dev/kfd", "/dev/dxg", *map(str, Path("/dev").glob("nvidia[0-9]*"))]


@pytest.mark.skipif(any(map(os.path.exists, GPU_DEVICE_FILES)), reason="this machine has a GPU's device file")
def test_without_a_gpu_device_file_the_default_is_the_cpu_without_asking_torch(tmp_path):
    (tmp_path / "python").write_text("#!/bin/sh\nexit 1\n")  # a python that cannot import torch
    (tmp_path / "python").chmod(0o755)
    result = lib_call(f"PATH={shlex.quote(str(tmp_path))}:$PATH", "default_gpus")
    assert (result.returncode, result.stdout) == (0, "0\n"), result.stderr


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


@pytest.mark.parametrize("dictionary", ["dict.en.txt", "dict.txt"])  # a translation's, a language model's
def test_a_data_bin_without_the_subset_is_named(tmp_path, dictionary):
    (tmp_path / dictionary).write_text("a 1\n")
    (tmp_path / "valid.en-es.en.bin").write_bytes(b"\0")
    assert lib_call(f"data_bin_id {tmp_path} valid").returncode == 0
    result = lib_call(f"data_bin_id {tmp_path} test")
    assert result.returncode == 1
    assert f"{tmp_path} holds no binarised subset 'test' (no test.* files)" in result.stderr


def test_a_path_is_recorded_relative_to_its_recording_directory(tmp_path):
    result = lib_call(f"path_from {tmp_path}/run/eval-test {tmp_path}/run")
    assert result.stdout.strip() == ".."


# The environment: only ODE_SEQ_* settings (and OMP_NUM_THREADS, PATH, PYTHONPATH) change what a
# pipeline does. Every name a script or examples/lib.sh assigns, and the generic names that shells,
# CI systems and build tools set, are set to junk; the scripts must do exactly what they do without.
def assigned_names() -> List[str]:
    names = set()
    for path in [EXAMPLES / "lib.sh", *EXAMPLES.glob("*/*.sh")]:
        text = path.read_text(encoding="utf-8")
        names |= set(re.findall(r"^\s*(?:local\s+|export\s+)?([A-Z][A-Z0-9_]*)=", text, re.M))
        names |= set(re.findall(r"^--\S+\s+([A-Z][A-Z0-9_]*)(?:\[\])?\b", text, re.M))  # option tables
    return sorted(names - {"PATH", "PYTHONPATH", "OMP_NUM_THREADS", "MKL_NUM_THREADS"})


def polluted(env: Dict[str, str]) -> Dict[str, str]:
    junk = {name: f"junk-{name}" for name in [*assigned_names(), "PYTHON", "ARCH", "CPU", "BEAM", "LANG_TGT"]}
    return {**env, **junk}


def test_the_names_set_to_junk_include_those_of_the_old_interfaces():
    assert {"ARCH", "GPUS", "DATA_BIN", "SAVE_DIR", "WORK_DIR", "CHECKPOINT", "EXTRA", "REPO_ROOT"} <= set(
        assigned_names()
    )


# Arguments with which a script stops with an error naming paths built from its defaults, before any
# output is written (WORK, a fresh directory, holds no data).
STOP_POINTS = {
    "translation/train_bible.sh": ["--work-dir", "WORK", "--gpus", "0"],
    "translation/evaluate.sh": ["--data-bin", "WORK", "--checkpoint-dir", "WORK", "--ref", "WORK", "--lang", "es"],
    "gec/train.sh": ["--work-dir", "WORK", "--gpus", "0"],
    "gec/evaluate.sh": ["--work-dir", "WORK", "--gpus", "0"],
    "summarization/train.sh": ["--work-dir", "WORK", "--gpus", "0"],
    "summarization/evaluate.sh": ["--work-dir", "WORK", "--gpus", "0"],
    "distillation/step_counts.sh": ["--checkpoint", "WORK", "--data-bin", "WORK", "--ref", "r", "--lang", "es"],
    "language_modeling/train.sh": ["--work-dir", "WORK", "--gpus", "0"],
    "language_modeling/evaluate.sh": ["--work-dir", "WORK", "--gpus", "0"],
    "language_modeling/sample.sh": ["--work-dir", "WORK", "--gpus", "0"],
}


@pytest.mark.parametrize("script", STOP_POINTS)
def test_generic_environment_names_do_not_change_what_a_pipeline_does(script, tmp_path):
    args = [str(tmp_path / "work") if arg == "WORK" else arg for arg in STOP_POINTS[script]]
    clean = run(EXAMPLES / script, *args)
    dirty = run(EXAMPLES / script, *args, env=polluted(dict(os.environ)))
    assert clean.returncode == 1 and ("is missing" in clean.stderr or "does not exist" in clean.stderr), clean.stderr
    assert (dirty.returncode, dirty.stdout, dirty.stderr) == (clean.returncode, clean.stdout, clean.stderr)
    assert not (tmp_path / "work").exists()


def test_generic_environment_names_leave_a_training_command_as_it_is():
    args = ["--recipe", "base-rk4", "--gpus", "2", "--dry-run", "--", "--patience", "3"]
    clean = run(EXAMPLES / "translation" / "train_wmt14.sh", *args)
    dirty = run(EXAMPLES / "translation" / "train_wmt14.sh", *args, env=polluted(dict(os.environ)))
    assert clean.returncode == 0, clean.stderr
    assert "--arch ode_transformer_rk4 " in clean.stdout and "--fp16" in clean.stdout
    assert (dirty.returncode, dirty.stdout) == (0, clean.stdout)


@pytest.fixture
def scoring_files(tmp_path) -> List[str]:
    (tmp_path / "hyp.txt").write_text("the cat sat on the mat\n", encoding="utf-8")
    (tmp_path / "ref.txt").write_text("the cat sat on a mat\n", encoding="utf-8")
    return ["--hyp", str(tmp_path / "hyp.txt"), "--ref", str(tmp_path / "ref.txt"), "--lang", "en"]


def test_python_set_for_scripts_setup_does_not_stop_scoring(scoring_files):
    clean = run(EXAMPLES / "translation" / "score.sh", *scoring_files)
    with_python = run(
        EXAMPLES / "translation" / "score.sh", *scoring_files, env=dict(os.environ, PYTHON="/no/such/python3")
    )
    assert clean.returncode == 0 and "sacreBLEU 13a:" in clean.stdout, clean.stderr
    assert (with_python.returncode, with_python.stdout) == (0, clean.stdout)


def test_cdpath_does_not_move_the_repository_root(scoring_files):
    """With CDPATH=".:DIR" exported, `cd examples/..` printed the directory, and the pipelines looked
    for the virtual environment in a two-line path."""
    env = {k: v for k, v in os.environ.items() if k != "ODE_SEQ_VENV"}
    result = run(Path("examples/translation/score.sh"), *scoring_files, env=dict(env, CDPATH=f".{os.pathsep}/tmp"))
    assert result.returncode == 0, result.stderr
    assert "sacreBLEU 13a:" in result.stdout


@pytest.mark.parametrize("value", ["abc", "0", "2,", "-1"])
@pytest.mark.parametrize("script", ["translation/score.sh", "gec/train.sh"])
def test_a_malformed_omp_num_threads_is_refused_naming_it(script, value, tmp_path):
    """OpenMP passes over such a value with one warning and uses every core."""
    result = run(EXAMPLES / script, "--gpus", "0", env=dict(os.environ, OMP_NUM_THREADS=value), cwd=tmp_path)
    assert result.returncode == 2
    assert "error: the environment variable OMP_NUM_THREADS must be a positive whole number" in result.stderr
    assert f"got '{value}'" in result.stderr and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("value", ["", "3", "4,1"])
def test_a_wellformed_omp_num_threads_is_accepted(value):
    result = run(EXAMPLES / "gec" / "train.sh", "--no-such-option", env=dict(os.environ, OMP_NUM_THREADS=value))
    assert result.returncode == 2 and "unknown option --no-such-option" in result.stderr


@pytest.fixture
def stub_root(tmp_path) -> Path:
    """A repository root with examples/lib.sh, the real quality_study.sh and demo_sweep.sh, and stubs
    of the scripts they start that record the thread settings they were given, then fail."""
    root = tmp_path / "repo"
    (root / "examples" / "translation").mkdir(parents=True)
    shutil.copy(EXAMPLES / "lib.sh", root / "examples" / "lib.sh")
    (root / "scripts").mkdir()
    shutil.copy(EXAMPLES.parent / "scripts" / "supervise.sh", root / "scripts" / "supervise.sh")
    for script in ("quality_study.sh", "demo_sweep.sh"):
        shutil.copy(EXAMPLES / "translation" / script, root / "examples" / "translation" / script)
    for stub in ("train_bible.sh", "run_bible_demo.sh"):
        path = root / "examples" / "translation" / stub
        path.write_text(f'#!/bin/sh\necho "$OMP_NUM_THREADS $MKL_NUM_THREADS" > {tmp_path}/{stub}.threads\nexit 1\n')
        path.chmod(0o755)
    (root / ".venv").symlink_to(Path(sys.prefix))
    return root


def recorded_threads(stub_root: Path, script: str, args: List[str], **env: str) -> str:
    clean = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "ODE_SEQ_VENV")}
    result = run(stub_root / "examples" / "translation" / script, *args, env={**clean, **env})
    assert result.returncode == 1, result.stderr
    stub = "train_bible.sh" if script == "quality_study.sh" else "run_bible_demo.sh"
    return (stub_root.parent / f"{stub}.threads").read_text().strip()


@pytest.mark.parametrize("env, threads", [({}, "1 1"), ({"OMP_NUM_THREADS": "3"}, "3 3")])
def test_a_study_run_has_omp_num_threads_threads_or_one(stub_root, env, threads):
    args = ["--work-dir", str(stub_root / "study"), "--gpus", "0", "--run", "rk4_6_6 1 2e-3 300 train"]
    assert recorded_threads(stub_root, "quality_study.sh", args, **env) == threads


@pytest.mark.parametrize(
    "args, env, threads",
    [([], {}, "1 1"), ([], {"OMP_NUM_THREADS": "2"}, "2 2"), (["--threads", "3"], {"OMP_NUM_THREADS": "2"}, "3 3")],
)
def test_the_sweep_runs_with_omp_num_threads_unless_threads_is_given(stub_root, args, env, threads):
    args = ["--work-dir", str(stub_root / "sweep"), "--settings", "rk4_d256_v8k_b2k_lr1e-3", *args]
    assert recorded_threads(stub_root, "demo_sweep.sh", args, **env) == threads


# The option table itself (examples/lib.sh, parse_options) on a table of every kind of row.
TABLE = """declare -A KINDS=([small]=1 [big]=2)
parse_options "$@" <<'EOF'
--ref=FILE            REF        -            required  # references
--work-dir=DIR        WORK_DIR   -            $REPO_ROOT/work-dirs/x
--beam=N              BEAM       positive     4
--kind=K              KIND       epoch|update epoch
--size=S              SIZE       keys:KINDS   small
--seeds=LIST          SEEDS      positives    1 2 3
--errant              ERRANT                  # a switch
--m2=FILE             M2[]                    # repeatable
--train-pairs|--vocab-size=N  PREPARE[]  forward  --vocab-size 4000
--old=X               -          is-now:--kind
--=OPTIONS            EXTRA[]    -            --max-len-b 10
EOF
declare -p REF WORK_DIR BEAM KIND SIZE SEEDS ERRANT M2 PREPARE EXTRA | sed 's/^declare -[-a] //'
"""


def parse(*args: str) -> subprocess.CompletedProcess:
    script = TABLE.replace('"$@"', " ".join(shlex.quote(arg) for arg in args))
    return lib_call(script)


def test_the_table_gives_defaults_and_values_of_every_kind_of_row():
    defaults = parse("--ref", "r")
    assert defaults.returncode == 0, defaults.stderr
    assert defaults.stdout.splitlines() == [
        'REF="r"',
        f'WORK_DIR="{REPO_ROOT}/work-dirs/x"',
        'BEAM="4"',
        'KIND="epoch"',
        'SIZE="small"',
        'SEEDS="1 2 3"',
        'ERRANT="0"',
        "M2=()",
        'PREPARE=([0]="--vocab-size" [1]="4000")',
        'EXTRA=([0]="--max-len-b" [1]="10")',
    ]
    given = parse(
        *"--ref r --beam 5 --kind update --size big --seeds 7 --errant --m2 a --m2 b".split(),
        "--train-pairs",
        "9",
        "--",
        "--x",
        "y z",
    )
    assert given.returncode == 0, given.stderr
    assert given.stdout.splitlines()[2:] == [
        'BEAM="5"',
        'KIND="update"',
        'SIZE="big"',
        'SEEDS="7"',
        'ERRANT="1"',
        'M2=([0]="a" [1]="b")',
        'PREPARE=([0]="--vocab-size" [1]="4000" [2]="--train-pairs" [3]="9")',
        'EXTRA=([0]="--x" [1]="y z")',
    ]


@pytest.mark.parametrize(
    "args, message",
    [
        ([], "--ref is required (see --help)"),
        (["--ref", "r", "--beam", "0"], "--beam must be a positive whole number, got '0'"),
        (["--ref", "r", "--kind", "last"], "--kind must be epoch or update, got last"),
        (["--ref", "r", "--size", "huge"], "--size must be big or small, got huge"),
        (["--ref", "r", "--seeds", "1 x"], "--seeds takes positive whole numbers, got 'x'"),
        (["--ref", "r", "--old", "x"], "--old is now --kind"),
        (["--ref"], "option --ref needs a value"),
        (["--ref", "r", "--ERRANT"], "unknown option --ERRANT (see --help)"),
    ],
)
def test_the_table_refuses_bad_command_lines(args, message):
    result = parse(*args)
    assert result.returncode == 2 and f"probe.sh: error: {message}" in result.stderr


def test_help_lists_the_rows_with_their_defaults(tmp_path):
    script = tmp_path / "probe.sh"
    script.write_text(
        f"#!/bin/bash\n# A probe.\n# Usage: probe.sh\nsource {shlex.quote(str(EXAMPLES / 'lib.sh'))}\n{TABLE}"
    )
    usage = run(script, "--help")
    assert usage.returncode == 0, usage.stderr
    assert usage.stdout.startswith("A probe.\nUsage: probe.sh\n  --ref FILE            references\n")
    assert "  --work-dir DIR        (default: work-dirs/x)\n" in usage.stdout
    assert "  --train-pairs N --vocab-size N  (default: --vocab-size 4000)\n" in usage.stdout
    assert "  --errant              a switch\n" in usage.stdout and "--old" not in usage.stdout
