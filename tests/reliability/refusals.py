"""Cases of a command that must be refused, run once each and checked the same way: a non-zero exit
(or the exact status of our tools), no output written, kept files unchanged, and a final error that
names the problem and the fix."""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, List, Mapping, Sequence, Tuple

import pytest

from testkit.in_process import run_in_process
from tests.e2e.cli import run
from tests.reliability.corpus import final_error

Command = Tuple[str, List[str]]
Outcome = Tuple[subprocess.CompletedProcess, Path, Dict[str, bytes]]


@dataclass(frozen=True)
class Refusal:
    """A command that must be refused, and what its refusal must say."""

    setup: Callable[[Any, Path], Command]  # (the test's inputs, an empty directory for the case)
    problem: str  # regex on the final error: the file and what is wrong
    fix: str  # regex on the final error: what to do
    outputs: Sequence[str] = ()  # glob patterns under the case directory that must match nothing
    kept: Sequence[str] = ()  # files under the case directory whose bytes must not change
    exit_status: int = 0  # the exact status our tools give (0: any non-zero status, fairseq's own)
    console_script: bool = False  # run as a subprocess (one case per tool), else its entry point in-process


def case_runner(
    cases: Mapping[str, Refusal], inputs: Any, tmp_path_factory, stdin: str = ""
) -> Callable[[str], Outcome]:
    """A function running case ``name`` once (later calls return the first outcome): the completed
    process, the case directory and the bytes its kept files had before."""
    results: Dict[str, Outcome] = {}

    def get(name: str) -> Outcome:
        if name not in results:
            case = tmp_path_factory.mktemp(re.sub(r"\W+", "_", name)[:40])
            tool, args = cases[name].setup(inputs, case)
            kept = {path: (case / path).read_bytes() for path in cases[name].kept}
            if cases[name].console_script:
                result = run(tool, args, stdin=stdin, check=False, timeout=600)
            else:
                result = run_in_process(tool, args, stdin=stdin)
            results[name] = (result, case, kept)
        return results[name]

    return get


def case_ids(names: Iterable[str]) -> List[object]:
    return [pytest.param(name, id=re.sub(r"\W+", "-", name).strip("-")) for name in names]


def check_exit_and_outputs(refusal: Refusal, outcome: Outcome) -> None:
    """The case exited as it must, wrote none of its outputs and changed none of its kept files."""
    result, case, kept = outcome
    expected = refusal.exit_status
    assert result.returncode == expected if expected else result.returncode != 0, result.stderr[-3000:]
    assert [p for p in refusal.outputs if list(case.glob(p))] == []
    assert [p for p, data in kept.items() if (case / p).read_bytes() != data] == []


def check_error(refusal: Refusal, outcome: Outcome) -> None:
    """The case's final error names the problem and the fix."""
    result = outcome[0]
    error = final_error(result.stderr)
    assert re.search(refusal.problem, error, re.S), error or result.stderr[-3000:]
    assert re.search(refusal.fix, error, re.S), error
