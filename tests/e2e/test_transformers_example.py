"""examples/transformers/demo.sh end to end on a slice of the Bible's English column, with tiny
budgets: the word-level tokenizer, the Trainer-trained ODE Llama and its residual twin, the
upcycled residual model and the exported fairseq model trained on in transformers, each checked on
what it printed and wrote; then a rerun (every stage reused) and the command-line contract."""

from __future__ import annotations

import json
import math
import re
import subprocess
from collections import Counter
from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

import ode_seq.transformers  # noqa: F401  (registers ode_llama: the folders load with the installed classes)
from tests.e2e.cli import run_pipeline

REPO_ROOT = Path(__file__).resolve().parents[2]
DEMO = REPO_ROOT / "examples" / "transformers" / "demo.sh"
SMOKE = [
    *("--train-lines", "600", "--valid-lines", "30", "--test-lines", "30", "--workers", "1"),
    *("--steps", "4", "--upcycle-steps", "3", "--fairseq-updates", "11", "--continue-steps", "3"),
    *("--batch-size", "4", "--block", "32", "--context", "16"),
]
NUMBER = r"([0-9.]+(?:e[-+][0-9]+)?)"


def run_demo(*args: str) -> subprocess.CompletedProcess:
    return run_pipeline(DEMO, *args)


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess]:
    work = tmp_path_factory.mktemp("transformers-demo")
    result = run_demo("--work-dir", str(work), *SMOKE)
    assert result.returncode == 0, result.stderr[-4000:]
    return work, result


def result_of(work: Path, stage: str) -> dict:
    return json.loads((work / "transformers" / stage / "result.json").read_text())


def test_the_tokenizer_holds_the_training_words_seen_at_least_twice(demo):
    work = demo[0]
    counts = Counter((work / "tok" / "train.txt").read_text(encoding="utf-8").split())
    tokenizer = AutoTokenizer.from_pretrained(work / "transformers" / "tokenizer")
    assert set(tokenizer.get_vocab()) == {"<pad>", "</s>", "<unk>"} | {w for w, n in counts.items() if n >= 2}
    rare = next(w for w, n in counts.items() if n == 1)
    assert tokenizer.convert_ids_to_tokens(tokenizer(f"the {rare}", add_special_tokens=False)["input_ids"]) == [
        "the",
        "<unk>",
    ]


def test_both_trained_models_print_a_finite_perplexity_over_every_test_token(demo):
    work, result = demo
    text = (work / "tok" / "test.txt").read_text(encoding="utf-8").splitlines()
    tokens = sum(len(line.split()) for line in text) + len(text)  # words and verse ends
    assert f"every one of the {tokens} test tokens" in result.stdout
    for stage, settings in (("rk2-learned", ("heun", "learned")), ("residual", ("euler", "fixed"))):
        record = result_of(work, stage)
        assert record["test"]["tokens"] == tokens
        assert math.isfinite(record["test"]["perplexity"]) and len(record["losses"]) == 4
        model = AutoModelForCausalLM.from_pretrained(work / "transformers" / stage)
        assert (model.config.model_type, model.config.decoder_ode_method, model.config.ode_coefficients) == (
            "ode_llama",
            *settings,
        )
    printed = re.findall(rf"4 Trainer steps \(\d+ s\): {NUMBER}", result.stdout)
    assert [float(p) for p in printed] == [
        round(result_of(work, s)["test"]["perplexity"], 2) for s in ("rk2-learned", "residual")
    ]


def test_the_upcycled_model_is_the_residual_models_layers_with_new_gates_only(demo):
    work = demo[0]
    folder = work / "transformers"
    residual = dict(AutoModelForCausalLM.from_pretrained(folder / "residual").named_parameters())
    record = result_of(work, "residual-to-rk2")
    assert record["new_parameters"] == [
        f"model.layers.{i}.combiner.proj.{p}" for i in range(2) for p in ("weight", "bias")
    ]
    assert set(residual) | set(record["new_parameters"]) == {
        n for n, _ in AutoModelForCausalLM.from_pretrained(folder / "residual-to-rk2").named_parameters()
    }
    assert math.isfinite(record["test_before"]["perplexity"]) and math.isfinite(record["test"]["perplexity"])
    assert len(record["losses"]) == 3


def test_the_exported_fairseq_model_starts_training_in_transformers_from_fairseqs_loss(demo):
    work, result = demo
    first = result_of(work, "fairseq-continued")["first_step"]
    assert first["max_token_difference"] <= first["rounding_bound"]
    assert abs(first["transformers_loss"] - first["fairseq_loss"]) <= first["rounding_bound"]
    assert result_of(work, "fairseq-continued")["losses"][0] == pytest.approx(first["transformers_loss"], abs=0)
    assert f"transformers {first['transformers_loss']:.6f}, fairseq {first['fairseq_loss']:.6f}" in result.stdout
    model = AutoModelForCausalLM.from_pretrained(work / "transformers" / "fairseq-continued", trust_remote_code=True)
    assert type(model).__name__ == "ODEXGLMForCausalLM"
    exported = AutoModelForCausalLM.from_pretrained(work / "transformers" / "fairseq-hf", trust_remote_code=True)
    changed = [n for n, p in model.named_parameters() if not torch.equal(p, dict(exported.named_parameters())[n])]
    assert "model.layers.0.fc1.weight" in changed


def test_a_rerun_reuses_every_stage_and_prints_the_same_results(demo):
    work, first = demo
    again = run_demo("--work-dir", str(work), *SMOKE)
    assert again.returncode == 0, again.stderr[-4000:]
    assert again.stdout == first.stdout
    for stage in ("tokenizer", "rk2-learned", "residual", "residual-to-rk2", "fairseq-continued"):
        assert f"skip {stage}:" in again.stderr


def test_other_settings_in_the_same_work_dir_are_refused(demo):
    result = run_demo("--work-dir", str(demo[0]), *SMOKE, "--steps", "5")
    assert result.returncode == 1
    assert "was prepared with other settings" in result.stderr and "use another work dir or delete it" in result.stderr


def test_a_context_as_long_as_the_block_is_a_usage_error(tmp_path):
    result = run_demo("--work-dir", str(tmp_path), "--block", "32", "--context", "32")
    assert result.returncode == 2
    assert "--context (32) must be below --block (32)" in result.stderr
    assert not any(tmp_path.iterdir())
