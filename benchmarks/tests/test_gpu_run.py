"""The GPU run's time budget (benchmarks/gpu_run.py): a part past its limit is cut cleanly, a stop
ends the part running and is reported, a failing part is reported as failed."""

from __future__ import annotations

import signal
import sys
import time

from benchmarks import gpu_run


def test_a_part_past_its_limit_is_stopped_and_keeps_its_output(tmp_path):
    sleeper = gpu_run.Part(
        "sleeper",
        1.0,
        lambda options, limit: [
            sys.executable,
            "-c",
            "print('partial result', flush=True); import time; time.sleep(120)",
        ],
    )
    options = gpu_run.Options(str(tmp_path), "", "", "cpu", True)
    started = time.perf_counter()
    with open(tmp_path / "run.log", "w") as log:
        outcome = gpu_run.run_part(sleeper, options, 3.0, log, gpu_run.StopRequest())
    assert time.perf_counter() - started < 3.0 + gpu_run.STOP_GRACE_SECONDS
    assert outcome.status.startswith("cut at its limit of 3 s")
    assert "partial result" in (tmp_path / "run.log").read_text()


def test_a_stop_that_lands_while_a_part_starts_stops_it_and_is_reported(tmp_path):
    """The signal handler only records the stop, so one that arrives before the part's process is
    known (here: before it starts) still ends that process and names the signal in its outcome."""
    sleep = [sys.executable, "-c", "import time; time.sleep(120)"]
    sleeper = gpu_run.Part("sleeper", 1.0, lambda options, limit: sleep)
    stop = gpu_run.StopRequest()
    stop(signal.SIGTERM, None)
    stop(signal.SIGINT, None)  # a later stop changes nothing
    started = time.perf_counter()
    with open(tmp_path / "run.log", "w") as log:
        outcome = gpu_run.run_part(sleeper, gpu_run.Options(str(tmp_path), "", "", "cpu", True), 60.0, log, stop)
    assert time.perf_counter() - started < gpu_run.STOP_GRACE_SECONDS
    assert outcome.status == "stopped by SIGTERM (partial results kept)"


def test_a_stop_ends_the_environment_probe_and_is_reported(tmp_path):
    stop = gpu_run.StopRequest()
    stop(signal.SIGHUP, None)
    started = time.perf_counter()
    found = gpu_run.environment(gpu_run.Options(str(tmp_path), "", "", "cpu", True), stop)
    assert time.perf_counter() - started < gpu_run.STOP_GRACE_SECONDS
    assert found["probe_error"] == "stopped by SIGHUP" and "torch" not in found


def test_a_part_ended_by_a_stop_signal_of_its_own_is_reported_stopped(tmp_path):
    """The supervisor of gpu.sh stops every process of the run; the part may end before this one sees its signal."""
    command = [sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGTERM)"]
    killed = gpu_run.Part("killed", 1.0, lambda options, limit: command)
    with open(tmp_path / "run.log", "w") as log:
        options = gpu_run.Options(str(tmp_path), "", "", "cpu", True)
        outcome = gpu_run.run_part(killed, options, 30.0, log, gpu_run.StopRequest())
    assert outcome.status == "stopped by SIGTERM (partial results kept)"


def test_a_failing_part_is_reported_as_failed(tmp_path):
    failing = gpu_run.Part("failing", 1.0, lambda options, limit: [sys.executable, "-c", "raise SystemExit(3)"])
    with open(tmp_path / "run.log", "w") as log:
        outcome = gpu_run.run_part(
            failing, gpu_run.Options(str(tmp_path), "", "", "cpu", True), 30.0, log, gpu_run.StopRequest()
        )
    assert outcome.status == "failed (exit 3)"
