"""fairseq's own unit tests, run plainly and with the ode-seq plugin loaded, compared test by test.

    python scripts/fairseq_unit_tests.py FAIRSEQ_SOURCE [--files tests/test_x.py ...] [--report out.json]

FAIRSEQ_SOURCE is a fairseq source tree (of the installed version, 0.12.3 for ve-fairseq) or its
``tests/`` folder, e.g. ``git -C <fairseq clone> archive v0.12.3 tests | tar -x -C DIR``. Each run
gets a fresh copy of ``tests/`` in a temporary folder (so the tree's own ``fairseq/`` sources are
never imported instead of the installed package) and a pytest process of its own; the plugin run
loads ``user_dir`` as ``--user-dir`` does, before the tests are collected, so every fix applies
(``ODE_SEQ_DISABLE_FIXES`` is honoured). Exit status 1 when a test that passes plainly does not
pass with the plugin, 2 when a run does not complete, 0 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ElementTree
from typing import Dict, List, Optional, Sequence, Tuple

# fairseq's CPU test files that run in minutes on the installed fairseq, among them every one that
# uses an object a fix patches (batching, n-gram blocking, the sequence generator and scorer,
# checkpoint loading and copying, option parsing, the translation task, FP16Optimizer). Left out,
# and available through --files: test_binaries and test_reproducibility (they train dozens of
# models: an hour and more on 2 cores). Not run: gpu/ and test_amp_optimizer (CUDA), speech*/
# (extra packages), distributed/ (processes of their own), test_hf_hub (internet),
# test_average_checkpoints (imports the tree's scripts/) and test_dataclass_utils (not collected on
# Python >= 3.11: a dataclass with a mutable default).
CPU_TEST_FILES = (
    "tests/test_checkpoint_utils.py",
    "tests/test_sequence_generator.py",
    "tests/test_sequence_scorer.py",
    "tests/test_backtranslation_dataset.py",
    "tests/test_online_backtranslation.py",
    "tests/test_data_utils.py",
    "tests/test_resampling_dataset.py",
    "tests/test_iterators.py",
    "tests/test_dataset.py",
    "tests/test_token_block_dataset.py",
    "tests/test_dictionary.py",
    "tests/test_train.py",
    "tests/test_valid_subset_checks.py",
    "tests/test_fp16_optimizer.py",
    "tests/test_memory_efficient_fp16.py",
    "tests/test_file_io.py",
    "tests/test_iopath.py",
    "tests/test_export.py",
    "tests/test_lstm_jitable.py",
    "tests/test_inference_dropout.py",
    "tests/test_constraints.py",
    "tests/test_label_smoothing.py",
    "tests/test_noising.py",
    "tests/test_metrics.py",
    "tests/test_utils.py",
    "tests/tasks/test_denoising.py",
    "tests/tasks/test_span_masked_lm.py",
)
# The plugin run: fairseq's --user-dir loading of ode-seq's plugin directory, then pytest.
LOAD_PLUGIN_THEN_PYTEST = (
    "import argparse, json, sys\n"
    "from fairseq import utils\n"
    "from ode_seq.cli.plugin_dir import plugin_directory\n"
    "utils.import_user_module(argparse.Namespace(user_dir=plugin_directory()))\n"
    "from ode_seq.fairseq_fixes import apply_fixes\n"
    "json.dump(apply_fixes(), open(sys.argv[1], 'w'))\n"
    "import pytest\n"
    "sys.exit(pytest.main(sys.argv[2:]))\n"
)
PLAIN_PYTEST = "import sys, pytest\nsys.exit(pytest.main(sys.argv[2:]))\n"
Outcomes = Dict[str, str]


def tests_folder(source: str) -> str:
    """The ``tests/`` folder of a fairseq source tree, or ``source`` itself if it is one."""
    for candidate in (os.path.join(source, "tests"), source):
        if (
            os.path.isfile(os.path.join(candidate, "utils.py"))
            and os.path.basename(os.path.normpath(candidate)) == "tests"
        ):
            return os.path.abspath(candidate)
    raise ValueError(
        f"{source} is neither a fairseq source tree nor its tests/ folder (no tests/utils.py): give "
        "e.g. the folder that `git -C <fairseq clone> archive v0.12.3 tests | tar -x -C DIR` fills"
    )


def read_junit(path: str, files: Sequence[str]) -> Tuple[Outcomes, Dict[str, float]]:
    """Test id (``tests.test_x.Class::test_y``) -> passed, failed, error or skipped (xfail
    included); and the seconds spent in each of ``files``."""
    outcomes: Outcomes = {}
    seconds = dict.fromkeys(files, 0.0)
    # a file's tests are named after its module: tests.test_x, or test_x in a folder without __init__.py
    modules = {file[: -len(".py")].replace("/", "."): file for file in files}
    modules.update({os.path.basename(file)[: -len(".py")]: file for file in files})
    for case in ElementTree.parse(path).iter("testcase"):
        classname = case.get("classname") or ""
        tags = {child.tag for child in case}
        outcome = next((tag for tag in ("error", "failure", "skipped") if tag in tags), "passed")
        outcomes[f"{classname}::{case.get('name')}"] = outcome.replace("failure", "failed")
        module = next((m for m in modules if classname == m or classname.startswith(m + ".")), None)
        if module:
            seconds[modules[module]] += float(case.get("time") or 0)
    return outcomes, {file: round(s, 1) for file, s in seconds.items()}


def run_tests(tests: str, files: Sequence[str], with_plugin: bool, timeout_s: float) -> Tuple[Outcomes, Dict]:
    """Per-test outcomes of ``files`` in a fresh copy of ``tests``, and what the run was."""
    with tempfile.TemporaryDirectory(prefix="fairseq-tests-") as work:
        shutil.copytree(tests, os.path.join(work, "tests"))
        junit, applied = os.path.join(work, "junit.xml"), os.path.join(work, "applied.json")
        code = LOAD_PLUGIN_THEN_PYTEST if with_plugin else PLAIN_PYTEST
        pytest_args = ["-q", "-p", "no:cacheprovider", f"--junitxml={junit}", *files]
        start = time.monotonic()
        command = [sys.executable, "-c", code, applied, *pytest_args]
        result = subprocess.run(command, cwd=work, timeout=timeout_s, stdout=sys.stderr)  # pytest's progress
        seconds = time.monotonic() - start
        if not os.path.exists(junit):
            raise RuntimeError(f"pytest wrote no results (exit {result.returncode}; its output is above)")
        outcomes, file_seconds = read_junit(junit, files)
        fixes = json.load(open(applied)) if with_plugin else None
    run = {"seconds": round(seconds, 1), "pytest_exit": result.returncode, "applied_fixes": fixes}
    return outcomes, {**run, "file_seconds": file_seconds}


def counts(outcomes: Outcomes) -> Dict[str, int]:
    return {kind: sum(o == kind for o in outcomes.values()) for kind in ("passed", "failed", "error", "skipped")}


def compare(plain: Outcomes, plugin: Outcomes) -> Dict[str, List[str]]:
    """Tests passing plainly but not with the plugin (broken), and the other way round (fixed)."""
    return {
        "broken": sorted(t for t, o in plain.items() if o == "passed" and plugin.get(t) != "passed"),
        "fixed": sorted(t for t, o in plugin.items() if o == "passed" and plain.get(t, "passed") != "passed"),
    }


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("source", help="a fairseq source tree or its tests/ folder")
    parser.add_argument("--files", nargs="+", default=list(CPU_TEST_FILES), help="test files, relative to the tree")
    parser.add_argument("--report", help="write counts, times and the tests broken and fixed to this JSON file")
    parser.add_argument("--timeout-s", type=float, default=3600, help="limit for each of the two runs")
    args = parser.parse_args(argv)
    try:
        tests = tests_folder(args.source)
    except ValueError as error:
        parser.error(str(error))
    missing = [f for f in args.files if not os.path.isfile(os.path.join(os.path.dirname(tests), f))]
    if missing:
        parser.error(f"{', '.join(missing)} not in {os.path.dirname(tests)}: give paths like tests/test_x.py")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # so the running pytest is stopped too
    runs = {}
    for mode in ("plain", "plugin"):
        try:
            outcomes, run = run_tests(tests, args.files, mode == "plugin", args.timeout_s)
        except (RuntimeError, subprocess.TimeoutExpired) as error:
            print(f"the {mode} run did not complete: {error}", file=sys.stderr)
            return 2
        runs[mode] = {"outcomes": outcomes, **run}
        print(f"{mode:6} {counts(outcomes)} in {run['seconds']} s", flush=True)
    print(f"plugin run applied fixes: {', '.join(runs['plugin']['applied_fixes']) or 'none'}")
    changes = compare(runs["plain"]["outcomes"], runs["plugin"]["outcomes"])
    for kind, tests_changed in changes.items():
        print(f"{kind} by the plugin: {len(tests_changed)}", *(f"  {t}" for t in tests_changed), sep="\n")
    if args.report:
        summary = {mode: {**run, **counts(run["outcomes"])} for mode, run in runs.items()}
        with open(args.report, "w") as out:
            json.dump({"files": args.files, **summary, **changes}, out, indent=1)
    return 1 if changes["broken"] else 0


if __name__ == "__main__":
    sys.exit(main())
