"""tuning_table.py: the choice of each configuration's learning rate and warmup by final validation
NLL, and the tuning table of quality_study.sh --tune."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import List

import pytest

TUNING_TABLE = Path(__file__).resolve().parents[2] / "examples" / "translation" / "tuning_table.py"


def fake_run(grid: Path, config: str, setting: str, curve: dict, done: bool = True) -> None:
    lr, warmup = setting.split("/")
    run_dir = grid / config / f"lr{lr}-warmup{warmup}" / "seed1"
    run_dir.mkdir(parents=True)
    (run_dir / "train.log").write_text(
        "".join(
            f"| valid on 'valid' subset | loss 9.0 | nll_loss {nll} | ppl 2.0 | num_updates {update}\n"
            for update, nll in curve.items()
        )
    )
    if done:
        (run_dir / "train.done").touch()


@pytest.fixture
def tuning_table(capsys, monkeypatch):
    """tuning_table.py's main in this process: (exit status, stdout, stderr) as a namespace."""
    monkeypatch.syspath_prepend(str(TUNING_TABLE.parent))  # its neighbour study_table, as when run as a script
    spec = importlib.util.spec_from_file_location("tuning_table", TUNING_TABLE)
    module = importlib.util.module_from_spec(spec)
    sys.modules["tuning_table"] = module
    spec.loader.exec_module(module)

    def call(*args: str) -> SimpleNamespace:
        status = module.main(list(args))
        out, err = capsys.readouterr()
        return SimpleNamespace(returncode=status, stdout=out, stderr=err)

    return call


WARMUP_300 = ["1e-3/300", "2e-3/300", "4e-3/300"]  # three peak learning rates, 300 warm-up updates


def seed_one_of(grid_dir: Path) -> List[str]:
    """tuning_table.py's options naming the runs of seed 1 in ``grid_dir``."""
    return ["--grid-dir", str(grid_dir), "--seed", "1"]


def test_best_setting_has_the_lowest_final_nll_not_the_lowest_along_the_way(tmp_path, tuning_table):
    fake_run(tmp_path, "rk4_6_6", "1e-3/300", {200: 7.0, 400: 6.0})
    fake_run(tmp_path, "rk4_6_6", "2e-3/300", {200: 6.5, 400: 5.5})
    fake_run(tmp_path, "rk4_6_6", "4e-3/300", {200: 5.0, 400: 5.6})
    result = tuning_table(*seed_one_of(tmp_path), "--best", "rk4_6_6", "--settings", *WARMUP_300)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "2e-3 300\n"


def test_a_tie_goes_to_the_first_setting_listed(tmp_path, tuning_table):
    for setting in ("2e-3/150", "2e-3/600"):
        fake_run(tmp_path, "residual_6_6", setting, {400: 5.5})
    result = tuning_table(*seed_one_of(tmp_path), "--best", "residual_6_6", "--settings", "2e-3/600", "2e-3/150")
    assert result.stdout == "2e-3 600\n"


def test_table_marks_the_choice_and_a_choice_at_the_edge_of_the_grid(tmp_path, tuning_table):
    for lr, nll in (("1e-3", 5.9), ("2e-3", 5.5), ("4e-3", 5.2)):
        fake_run(tmp_path, "rk4_6_6", f"{lr}/300", {200: 7.0, 400: nll})
    fake_run(tmp_path, "rk4_6_6", "4e-3/150", {200: 6.9, 400: 5.3})
    result = tuning_table(*seed_one_of(tmp_path), "--config", "rk4_6_6", *WARMUP_300, "4e-3/150")
    assert result.returncode == 0, result.stderr
    rows = [line for line in result.stdout.splitlines() if line.startswith("| RK4")]
    assert rows == [
        "| RK4 6-6 | 1e-3 | 300 | 7.000 | 5.900 |",
        "| RK4 6-6 | 2e-3 | 300 | 7.000 | 5.500 |",
        "| RK4 6-6 | 4e-3 | 300 | **7.000** | **5.200** |",
        "| RK4 6-6 | 4e-3 | 150 | 6.900 | 5.300 |",
    ]
    assert "the chosen peak lr 4e-3 is the largest tried at this warmup" in result.stdout
    assert "chosen warmup" not in result.stdout  # two warmups tried: no edge to speak of


def test_an_unfinished_run_stops_the_choice_with_a_message(tmp_path, tuning_table):
    fake_run(tmp_path, "rk4_6_6", "1e-3/300", {200: 7.0})
    fake_run(tmp_path, "rk4_6_6", "2e-3/300", {200: 6.0}, done=False)
    result = tuning_table(*seed_one_of(tmp_path), "--best", "rk4_6_6", "--settings", "1e-3/300", "2e-3/300")
    assert result.returncode == 2
    assert "lr2e-3-warmup300/seed1 has not finished training" in result.stderr
    assert "quality_study.sh --tune" in result.stderr
