"""scripts/fairseq_unit_tests.py: fairseq's own unit tests pass with the plugin loaded wherever they
pass without it."""

import json
import os
import subprocess
import sys

import pytest

from tests.e2e.cli import ROOT

TOOL = os.path.join(ROOT, "scripts", "fairseq_unit_tests.py")
SOURCE_VARIABLE = "ODE_SEQ_FAIRSEQ_TESTS"
# Stand-ins for fairseq's tests: one the plugin breaks, one it fixes, one it leaves alone.
STAND_IN_TESTS = """
from fairseq.data import data_utils


def test_broken_by_the_plugin():
    assert not hasattr(data_utils.batch_by_size, "__wrapped__")


def test_fixed_by_the_plugin():
    assert hasattr(data_utils.batch_by_size, "__wrapped__")


def test_left_alone():
    assert data_utils.batch_by_size
"""


def _compare(*args, **env):
    return subprocess.run(
        [sys.executable, TOOL, *args], capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": "1", **env}
    )


def test_a_test_passing_plainly_but_not_with_the_plugin_fails_the_comparison(tmp_path):
    tests = tmp_path / "fairseq" / "tests"
    tests.mkdir(parents=True)
    for name, text in (("__init__.py", ""), ("utils.py", ""), ("test_stand_in.py", STAND_IN_TESTS)):
        (tests / name).write_text(text)
    report_path = tmp_path / "report.json"
    result = _compare(
        str(tests.parent), "--files", "tests/test_stand_in.py", "--report", str(report_path), ODE_SEQ_DISABLE_FIXES=""
    )
    assert result.returncode == 1, result.stdout + result.stderr[-3000:]
    report = json.loads(report_path.read_text())
    assert report["broken"] == ["tests.test_stand_in::test_broken_by_the_plugin"]
    assert report["fixed"] == ["tests.test_stand_in::test_fixed_by_the_plugin"]
    assert (report["plain"]["passed"], report["plugin"]["passed"]) == (2, 2)
    assert "batch_by_size" in report["plugin"]["applied_fixes"]
    assert "broken by the plugin: 1\n  tests.test_stand_in::test_broken_by_the_plugin" in result.stdout


def test_a_folder_that_is_not_fairseqs_tests_is_refused(tmp_path):
    result = _compare(str(tmp_path))
    assert result.returncode == 2
    assert f"{tmp_path} is neither a fairseq source tree nor its tests/ folder" in result.stderr


@pytest.mark.skipif(
    not os.environ.get(SOURCE_VARIABLE),
    reason=f"{SOURCE_VARIABLE} names no fairseq source tree (of the installed version, e.g. from "
    "`git -C <fairseq clone> archive v0.12.3 tests | tar -x -C DIR`; tests never download)",
)
def test_fairseqs_own_unit_tests_pass_with_the_plugin_wherever_they_pass_without_it(tmp_path):
    result = _compare(os.environ[SOURCE_VARIABLE], "--report", str(tmp_path / "report.json"))
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
