"""Errors instead of tracebacks, and nothing left behind (issue 45, item 5): fairseq-eval-lm on a
translation checkpoint and with a context window that leaves nothing to score, a binarised data
file cut short, ``ode-seq analyze`` on data that names no language pair, an export stopped by
SIGTERM or SIGKILL, and the disk named by a failed pipeline stage only when it is short."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ode_seq.output_files import UNLOCKED_GRACE_SECONDS
from testkit.in_process import run_in_process
from tests.e2e.cli import BIN, ROOT
from tests.e2e.test_pipeline_lock import lib_script
from tests.export.models import language_model_checkpoint
from tests.reliability import mismatch_data as md
from tests.reliability.corpus import tool_env


@pytest.fixture(scope="module")
def translation_model(data_bin, tmp_path_factory) -> Path:
    """A translation checkpoint trained without --source-lang/--target-lang (its pair inferred)."""
    argv = ["--task", "translation", "--criterion", "cross_entropy", *md.TRANSFORMER]
    return md.save(data_bin, tmp_path_factory.mktemp("translation") / "transformer.pt", argv)


@pytest.fixture(scope="module")
def lm_data(data_bin, tmp_path_factory) -> Path:
    """The source side of the translation data as language-modelling data (dict.txt, valid split)."""
    return md.language_model_data(data_bin, tmp_path_factory.mktemp("lm") / "data")


@pytest.fixture(scope="module")
def language_model(lm_data) -> Path:
    return md.save(lm_data, lm_data.parent / "lm.pt", md.LANGUAGE_MODEL)


def eval_lm(data: Path, checkpoint: Path, *options: str):
    args = [str(data), "--user-dir", "user_dir", "--path", str(checkpoint), "--gen-subset", "valid", "--cpu"]
    return run_in_process("fairseq-eval-lm", [*args, "--num-workers", "0", *options])


@pytest.mark.parametrize("data", ["lm_data", "data_bin"], ids=["language-model-data", "its-translation-data"])
def test_eval_lm_on_a_translation_checkpoint_names_its_task_and_the_tool_for_it(request, translation_model, data):
    result = eval_lm(request.getfixturevalue(data), translation_model)
    assert result.returncode == 1
    assert (
        f"{translation_model} is not a language model: it was trained with --task translation (architecture "
        "transformer), and fairseq-eval-lm scores language models only; score a translation model's references "
        f"with fairseq-generate DATA-BIN --path {translation_model} --score-reference" in result.stderr
    )


@pytest.mark.parametrize("context_window, new_tokens", [(32, 0), (40, -8)], ids=["equal", "larger"])
def test_eval_lm_with_a_context_window_as_long_as_the_blocks_gives_the_arithmetic(
    lm_data, language_model, context_window, new_tokens
):
    """Before: ZeroDivisionError (equal) or a numpy error about negative dimensions (larger)."""
    result = eval_lm(lm_data, language_model, "--tokens-per-sample", "32", "--context-window", str(context_window))
    assert result.returncode == 1
    assert (
        f"--context-window {context_window} must be smaller than --tokens-per-sample 32: fairseq-eval-lm scores "
        f"blocks of tokens-per-sample - context-window = 32 - {context_window} = {new_tokens} new tokens"
        in result.stderr
    )
    assert "pass --context-window 16 (any value below 32) or a larger --tokens-per-sample" in result.stderr


def cut_copy(data: Path, destination: Path, name: str, size: int) -> Path:
    """A copy of data directory ``data`` whose file ``name`` keeps its first ``size`` bytes."""
    import shutil

    shutil.copytree(data, destination)
    os.truncate(destination / name, size)
    return destination


def test_eval_lm_on_a_data_file_cut_short_names_it_with_its_size_and_the_size_expected(
    lm_data, language_model, tmp_path
):
    """Before: "ValueError: offset must be non-negative and no greater than buffer length (100)"."""
    expected = (lm_data / "valid.bin").stat().st_size
    cut = cut_copy(lm_data, tmp_path / "cut", "valid.bin", 100)
    result = eval_lm(cut, language_model, "--tokens-per-sample", "32")
    assert result.returncode == 1
    assert (
        f"{cut}/valid.bin is cut short: it has 100 bytes, but its index {cut}/valid.idx lists 20 samples, which "
        f"end at byte {expected}; binarise the data again (fairseq-preprocess)" in result.stderr
    )


def test_generate_on_a_data_file_cut_short_names_it_before_translating(data_bin, translation_model, tmp_path):
    name = "test.src-tgt.tgt.bin"
    cut = cut_copy(data_bin, tmp_path / "cut", name, 40)
    args = [str(cut), "--user-dir", "user_dir", "--path", str(translation_model), "--gen-subset", "test", "--cpu"]
    result = run_in_process("fairseq-generate", [*args, "--beam", "2", "--max-len-b", "4"])
    assert result.returncode == 1
    assert f"{cut}/{name} is cut short: it has 40 bytes" in result.stderr
    assert "S-0" not in result.stdout


def test_an_index_file_cut_short_is_named_with_its_size_and_the_size_expected(lm_data, language_model, tmp_path):
    """Before: "ValueError: buffer is smaller than requested size", naming no file."""
    cut = cut_copy(lm_data, tmp_path / "cut", "valid.idx", 60)
    result = eval_lm(cut, language_model, "--tokens-per-sample", "32")
    assert result.returncode == 1
    assert f"{cut}/valid.idx is cut short: it has 60 bytes, but its header lists 20 samples, which take 266 bytes" in (
        result.stderr
    )


def analyze(checkpoint: Path, data: Path, out: Path, *options: str):
    return run_in_process(
        "python",
        [
            "-m",
            "ode_seq.cli.analyze",
            "--path",
            str(checkpoint),
            "--data",
            str(data),
            "--out",
            str(out),
            "--max-sentences",
            "2",
            "--lyapunov-exponents",
            "1",
            *options,
        ],
    )


def test_analyze_a_translation_model_on_data_that_names_no_pair_asks_for_the_pair(translation_model, lm_data, tmp_path):
    """Before: "Exception: Could not infer language pair, please provide it explicitly", with no option to."""
    result = analyze(translation_model, lm_data, tmp_path / "report")
    assert result.returncode == 2
    assert (
        f"--data {lm_data} names no language pair (no train.SRC-TGT.* files; its dict.txt is a language model's "
        f"data), and {translation_model} is a translation model (--task translation) trained without "
        "--source-lang/--target-lang: pass --source-lang src --target-lang tgt with the data directory it was "
        "trained on" in result.stderr
    )
    assert not (tmp_path / "report").exists()


def test_analyze_takes_the_language_pair_it_is_given(translation_model, data_bin, lm_data, tmp_path):
    """--source-lang/--target-lang set the task's pair: on the language-model data the error moves on
    to the dictionary that is missing; on the translation data the report is written."""
    pair = ["--source-lang", "src", "--target-lang", "tgt"]
    missing = analyze(translation_model, lm_data, tmp_path / "refused", *pair)
    assert missing.returncode == 2
    assert f"No such file or directory: '{lm_data}/dict.src.txt'; fairseq-preprocess writes" in missing.stderr
    result = analyze(translation_model, data_bin, tmp_path / "report", *pair)
    assert result.returncode == 0, result.stderr[-2000:]
    assert (tmp_path / "report" / "report.json").is_file()


# Exports into PARENT/hf from the checkpoint, saying "staging" once its work directory is made, then
# waiting: the test stops it there (fairseq's save of the folder is made to wait for it).
STOPPED_EXPORT = """
import sys, time
from ode_seq.cli import export
from ode_seq.export import ode_xglm
def staging(*args, **kwargs):
    print("staging", flush=True)
    time.sleep(120)
ode_xglm.save = staging
export.main(["--to", "hf", "--path", sys.argv[1], "--output", sys.argv[2]])
"""


@pytest.fixture(scope="module")
def exportable_lm(tmp_path_factory) -> Path:
    checkpoint, _ = language_model_checkpoint(
        tmp_path_factory.mktemp("exportable") / "data", "ode_transformer_lm_euler"
    )
    return checkpoint


def stopped_export(checkpoint: Path, parent: Path, stop: signal.Signals) -> subprocess.CompletedProcess:
    """An export into ``parent/hf`` stopped by ``stop`` while it stages the folder."""
    process = subprocess.Popen(
        [sys.executable, "-c", STOPPED_EXPORT, str(checkpoint), str(parent / "hf")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env=tool_env(),
    )
    assert process.stdout.readline().strip() == "staging", process.stderr.read()[-2000:]
    assert [p.name for p in parent.iterdir() if p.name.startswith(".export-")]
    process.send_signal(stop)
    out, err = process.communicate(timeout=60)
    return subprocess.CompletedProcess(process.args, process.returncode, out, err)


def test_an_export_stopped_by_sigterm_removes_its_work_directory(exportable_lm, tmp_path):
    """Before: exit -15 (the process ended at once) and the hidden .export-* directory stayed."""
    stopped = stopped_export(exportable_lm, tmp_path, signal.SIGTERM)
    assert stopped.returncode == 143
    assert list(tmp_path.iterdir()) == []


def test_the_next_export_removes_the_work_directories_of_killed_exports_only(exportable_lm, tmp_path):
    """A SIGKILL leaves the work directory (nothing can run); the next export removes it, and one left
    by an earlier version (no lock, older than the grace period), but not one an export still uses."""
    killed = stopped_export(exportable_lm, tmp_path, signal.SIGKILL)
    assert killed.returncode == -signal.SIGKILL
    (left,) = [p for p in tmp_path.iterdir() if p.name.startswith(".export-")]
    older = tmp_path / ".export-older"
    older.mkdir()
    os.utime(older, (time.time() - 2 * UNLOCKED_GRACE_SECONDS,) * 2)
    running = subprocess.Popen(
        [sys.executable, "-c", STOPPED_EXPORT, str(exportable_lm), str(tmp_path / "other")],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env=tool_env(),
    )
    try:
        assert running.stdout.readline().strip() == "staging"
        in_use = {p for p in tmp_path.iterdir() if p.name.startswith(".export-")} - {left, older}
        result = run_in_process(
            "python",
            ["-m", "ode_seq.cli.export", "--to", "hf", "--path", str(exportable_lm), "--output", str(tmp_path / "hf")],
        )
        assert result.returncode == 0, result.stderr[-2000:]
        assert {p for p in tmp_path.iterdir() if p.name.startswith(".export-")} == in_use
        assert (tmp_path / "hf" / "config.json").is_file()
    finally:
        running.kill()
        running.wait()


def failed_stage(directory: Path, env=None) -> subprocess.CompletedProcess:
    """A pipeline stage (examples/lib.sh) writing ``directory/out`` whose command fails (``false``)."""
    script = lib_script(f'run_stage {shlex.quote(str(directory / "out"))} "a stage"', "false")
    return subprocess.run(script, capture_output=True, text=True, env=env, timeout=60)


def test_a_stage_failing_on_a_disk_with_room_does_not_name_the_disk(tmp_path):
    """Before: "The file system of DIR has N MiB free." on every failure, sending the user to the disk."""
    result = failed_stage(tmp_path)
    assert result.returncode == 1
    assert f"error: a stage did not finish (exit 1), so {tmp_path}/out was not written." in result.stderr
    assert "The file system" not in result.stderr


def test_a_stage_failing_on_a_disk_short_of_room_names_its_free_space(tmp_path):
    """A file system with 10 MiB available (as ``df`` reports it) is short of room: the line stays."""
    fake = tmp_path / "bin"
    fake.mkdir()
    header, disk = "Filesystem 1024-blocks Used Available Capacity Mounted on", "disk 100000 89760 10240 90% /"
    (fake / "df").write_text(f"#!/bin/sh\necho '{header}'\necho '{disk}'\n")
    (fake / "df").chmod(0o755)
    env = dict(os.environ, PATH=f"{fake}{os.pathsep}{BIN}{os.pathsep}{os.environ['PATH']}")
    result = failed_stage(tmp_path, env=env)
    assert result.returncode == 1
    assert f"The file system of {tmp_path} has 10 MiB free." in result.stderr
