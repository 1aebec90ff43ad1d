"""The hf-training and hf-decoding sections in the tiny --smoke mode: every ODE Llama against the
Llama of as many layers as it has layer evaluations, one row per measurement."""

import json
import math

from benchmarks.run import main

PAIRS = [
    "ode-llama euler 1L / llama 1L",
    "ode-llama rk2 1L / llama 2L",
    "ode-llama rk2-learned 1L / llama 2L",
    "ode-llama rk4 1L / llama 4L",
    "ode-llama pcformer 1L / llama 3L",
]


def test_hf_sections_compare_each_ode_llama_with_the_llama_of_its_layer_evaluations(tmp_path, capsys):
    out = tmp_path / "rows.json"
    assert main(["--smoke", "--rounds", "1", "--sections", "hf-training", "hf-decoding", "--json", str(out)]) == 0
    rows = json.loads(out.read_text())["rows"]
    metrics = ["tokens/s (train step)", "generated tokens/s (batch 1)", "generated tokens/s (batch 2)"]
    assert [(r["comparison"], r["metric"]) for r in rows] == [(pair, metric) for metric in metrics for pair in PAIRS]
    assert all(math.isfinite(r["ratio"]) and r["ratio"] > 0 and r["target"] == [">=", 0.95] for r in rows)
    printed = capsys.readouterr().out
    assert "| hf-decoding | ode-llama rk4 1L / llama 4L | generated tokens/s (batch 2) |" in printed
