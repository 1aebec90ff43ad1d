"""examples/translation/train_progress.py: progress, time left and the slow-machine warning."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "examples" / "translation" / "train_progress.py"
INNER = (
    "2026-11-30 18:08:47 | INFO | train_inner | epoch 001:     {u} / 626 loss={loss}, "
    "nll_loss=9.2, ppl=600, wps=1159, ups={ups}, wpb=1552.2, bsz=39.2, num_updates={u}, "
    "lr=5e-05, gnorm=5.068, train_wall=15, wall={wall}\n"
)
VALID = (
    "2026-11-30 18:09:34 | INFO | valid | epoch 001 | valid on 'valid' subset | loss 10.57 | "
    "nll_loss 10.204 | ppl 1179.16 | wps 4242.1 | wpb 1316.5 | bsz 36.4 | num_updates 40\n"
)
DONE = "2026-11-30 18:09:35 | INFO | fairseq_cli.train | done training in 62.0 seconds\n"


def fairseq_log(ups: float, intervals: int = 4) -> str:
    """train_inner lines every 10 updates at ``ups`` updates/s after a 5 s start-up."""
    lines = [
        INNER.format(u=10 * i, loss=12 - i, ups=ups, wall=round(5 + 10 * i / ups)) for i in range(1, intervals + 1)
    ]
    return "".join(lines) + VALID + DONE


def follow(text: str, *args: str, tmp_path: Path) -> subprocess.CompletedProcess:
    log = tmp_path / "train.log"
    return subprocess.run(
        [sys.executable, str(SCRIPT), "--log", str(log), *args], input=text, capture_output=True, text=True, check=True
    )


def test_progress_reports_updates_speed_and_time_left_and_logs_every_line(tmp_path):
    text = fairseq_log(ups=0.5)
    result = follow(text, "--max-update", "200", "--expected-ups", "0.5", tmp_path=tmp_path)
    lines = result.stderr.splitlines()
    assert lines[0] == (
        "update 10/200 (5%) | loss 11.00 | 0.50 updates/s (expected on an idle 2-core machine: 0.50) | ~6 min left"
    )
    assert lines[3] == "update 40/200 (20%) | loss 8.00 | 0.50 updates/s | ~5 min left"
    assert lines[4] == "validation after 40 updates: loss 10.57, perplexity 1179.2"
    assert lines[5] == "done training in 62.0 seconds"
    assert "warning" not in result.stderr
    assert (tmp_path / "train.log").read_text() == text


def test_a_machine_much_slower_than_expected_is_warned_about_once_after_twenty_updates(tmp_path):
    result = follow(fairseq_log(ups=0.1), "--max-update", "600", "--expected-ups", "0.5", tmp_path=tmp_path)
    warnings = [line for line in result.stderr.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1
    assert warnings[0].startswith(
        "warning: this machine trains at 0.10 updates/s, 5.0x slower than "
        "the 0.50 measured on an idle 2-core machine; training will take "
        "about 100 min."
    )
    lines = result.stderr.splitlines()
    assert lines.index(warnings[0]) == 3  # right after the progress line of update 30


def test_a_run_that_stops_early_shows_the_end_of_its_log(tmp_path):
    text = (
        INNER.format(u=10, loss=11, ups=0.5, wall=25)
        + "Traceback (most recent call last):\n"
        + "RuntimeError: out of memory\n"
    )
    result = follow(text, "--max-update", "100", tmp_path=tmp_path)
    assert "fairseq-train stopped early; the last lines of" in result.stderr
    assert result.stderr.rstrip().endswith("RuntimeError: out of memory")


def test_fields_of_fairseq_lines_are_read_as_numbers():
    sys.path.insert(0, str(SCRIPT.parent))
    from train_progress import log_fields

    assert log_fields(" loss=12.39, ups=0.66, num_updates=40, lr=2.0008e-04") == {
        "loss": 12.39,
        "ups": 0.66,
        "num_updates": 40.0,
        "lr": 2.0008e-04,
    }
