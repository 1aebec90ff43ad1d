"""Paired bootstrap (ode_seq.metrics.paired_bootstrap): the formulas by hand, sacreBLEU's own test
reproduced, and the --paired option of the BLEU and ROUGE command-line tools."""

from __future__ import annotations

import json
import os
import subprocess

import numpy as np
import pytest
from rouge_score.scoring import Score
from sacrebleu.metrics import BLEU

from ode_seq.metrics import rouge
from ode_seq.metrics.bleu import paired_test as bleu_paired_test
from ode_seq.metrics.bleu import sacrebleu_paired_bs
from ode_seq.metrics.paired_bootstrap import (
    Estimate,
    PairedInputError,
    check_same_length,
    compare,
    draw_counts,
    p_value,
    resample_indices,
)
from tests.metrics.cli import run_metric, run_score, score_spanish, spanish_references, write_lines
from tests.metrics.test_bleu import SACREBLEU, degraded


def test_p_value_counts_recentred_differences_above_the_observed_one_plus_one():
    # |S_r - B_r| = 2, 0, 1, 4 with mean 1.75, recentred 0.25, -1.75, -0.75, 2.25; one exceeds 1.
    system, baseline = np.array([3.0, 1.0, 2.0, 5.0]), np.ones(4)
    assert p_value(system, baseline, observed_difference=1.0) == pytest.approx(2 / 5)
    assert p_value(system, baseline, observed_difference=-1.0) == pytest.approx(2 / 5)
    assert p_value(system, baseline, observed_difference=0.2) == pytest.approx(3 / 5)


def test_outputs_scoring_alike_on_every_resample_get_p_one_not_sacrebleus_one_over_r_plus_one():
    same = np.array([1.0, 2.0, 3.0])
    assert p_value(same, same.copy(), 0.0) == 1.0


def test_interval_is_bootstrap_mean_and_half_the_central_95_percent_range():
    # R = 80 sorted scores 0..79: ⌊R/40⌋ = 2, so the range is scores[2] .. scores[77].
    estimate = Estimate.from_resamples(50.0, np.arange(80.0)[::-1])
    assert (estimate.score, estimate.mean, estimate.half_width) == (50.0, 39.5, 37.5)


def test_draw_counts_count_each_items_draws_per_resample():
    counts = draw_counts(np.array([[0, 0, 1], [2, 2, 2]]))
    assert counts.tolist() == [[2, 1, 0], [0, 0, 3]]


def test_resamples_are_sacrebleus_draws():
    expected = np.random.default_rng(7).choice(5, size=(3, 5), replace=True)
    assert (resample_indices(5, 3, seed=7) == expected).all()


def test_one_item_corpus_has_a_degenerate_bootstrap():
    # Every resample is the test set itself: no spread, and no resample exceeds the observed difference.
    result = compare("m", 3.0, 1.0, np.full(100, 3.0), np.full(100, 1.0))
    assert (result.system.mean, result.system.half_width, result.difference) == (3.0, 0.0, 2.0)
    assert result.p_value == pytest.approx(1 / 101)


def test_our_bootstrap_on_sacrebleus_statistics_reproduces_its_paired_test(spanish_verses):
    """Same draws, interval and p-value: sacreBLEU's PairedTest equals `compare` fed with BLEU
    recomputed by sacreBLEU from its per-sentence statistics on `resample_indices`."""
    references = spanish_verses
    system, baseline = degraded(references), [" ".join(line.split()[:-2]) for line in references]
    metric = BLEU()
    theirs_system, theirs_baseline, signature = sacrebleu_paired_bs(
        metric, system, baseline, references, n_samples=300, seed=99
    )
    indices = resample_indices(len(references), 300, seed=99)
    resampled, observed = [], []
    for hypotheses in (system, baseline):
        stats = np.array(metric._extract_corpus_statistics(hypotheses, [references]), dtype="float32")
        observed.append(metric._compute_score_from_stats(stats.sum(0).tolist()).score)
        resampled.append(np.array([metric._compute_score_from_stats(s.sum(0)).score for s in stats[indices]]))
    ours = compare("BLEU", observed[0], observed[1], *resampled)
    assert "bs:300|seed:99" in signature
    assert ours.system.score == pytest.approx(theirs_system.score)
    assert ours.p_value == pytest.approx(theirs_system.p_value)
    for estimate, theirs in ((ours.system, theirs_system), (ours.baseline, theirs_baseline)):
        assert (estimate.mean, estimate.half_width) == (pytest.approx(theirs.mean), pytest.approx(theirs.ci))


@pytest.fixture(scope="module")
def spanish_verses() -> list[str]:
    return spanish_references(150)


def a_close_pair(references: list[str]) -> tuple[list[str], list[str]]:
    """Two systems a little apart: of every 4 verses the second system translates one worse (its
    last word dropped) and one better (the degraded word order restored)."""
    system = degraded(references)

    def restore_order(line: str) -> str:
        words = line.split()
        if len(words) > 3:
            words[1], words[2] = words[2], words[1]
        return " ".join(words)

    return system, [
        " ".join(s.split()[:-1]) if i % 4 == 0 else restore_order(s) if i % 4 == 1 else s for i, s in enumerate(system)
    ]


def test_bleu_cli_paired_equals_sacrebleu_cli_paired_bs_with_the_same_seed(tmp_path, spanish_verses):
    ref = write_lines(tmp_path / "ref.es", spanish_verses)
    system_lines, baseline_lines = a_close_pair(spanish_verses)
    system, baseline = write_lines(tmp_path / "sys.es", system_lines), write_lines(tmp_path / "base.es", baseline_lines)
    paired = ["--paired", str(baseline), "--paired-samples", "500", "--paired-seed", "4242"]
    result = score_spanish(system, ref, *paired, "--json", str(tmp_path / "out.json"))
    assert result.returncode == 0, result.stderr
    ours = json.loads((tmp_path / "out.json").read_text())["paired"]
    cli = subprocess.run(
        [
            str(SACREBLEU),
            str(ref),
            "-i",
            str(baseline),
            str(system),
            "--paired-bs",
            "--paired-bs-n",
            "500",
            "-tok",
            "13a",
            "-f",
            "json",
        ],
        capture_output=True,
        text=True,
        env=dict(os.environ, SACREBLEU_SEED="4242"),
        check=True,
    )
    theirs_baseline, theirs_system = (entry["BLEU"] for entry in json.loads(cli.stdout))
    got = ours["metrics"]["sacreBLEU 13a"]
    assert 0.01 < theirs_system["p_value"] < 0.9  # a comparison where the p-value says something
    assert got["p_value"] == theirs_system["p_value"]
    assert (got["system"], got["system_mean"], got["system_ci"]) == pytest.approx(
        (theirs_system["score"], theirs_system["mean"], theirs_system["ci"]), abs=1e-9
    )
    assert (got["baseline"], got["baseline_mean"], got["baseline_ci"]) == pytest.approx(
        (theirs_baseline["score"], theirs_baseline["mean"], theirs_baseline["ci"]), abs=1e-9
    )
    assert (ours["samples"], ours["seed"], ours["baseline"]) == (500, 4242, str(baseline))
    assert "bs:500|seed:4242|case:mixed|eff:no|tok:13a" in ours["signatures"]["sacreBLEU 13a"]
    assert set(ours["metrics"]) == {"tokenised BLEU", "sacreBLEU 13a", "sacreBLEU intl"}
    assert "sacreBLEU 13a" in result.stdout and f"{got['p_value']:.4f}" in result.stdout


def test_bleu_paired_test_leaves_sacrebleu_seed_variable_as_it_was(monkeypatch, spanish_verses):
    monkeypatch.setenv("SACREBLEU_SEED", "5")
    system, baseline = a_close_pair(spanish_verses[:20])
    report, signatures = bleu_paired_test(
        system, baseline, spanish_verses[:20], "es", n_samples=50, seed=8, tokenizers=("13a",)
    )
    assert "seed:8" in signatures["sacreBLEU 13a"] and report.seed == 8
    assert os.environ["SACREBLEU_SEED"] == "5"


def test_bleu_of_a_system_against_itself_has_p_one(spanish_verses):
    system = degraded(spanish_verses[:30])
    report, _ = bleu_paired_test(system, list(system), spanish_verses[:30], "es", n_samples=50)
    assert [c.p_value for c in report.comparisons] == [1.0, 1.0, 1.0]
    assert all(c.difference == 0 for c in report.comparisons)


@pytest.mark.parametrize(
    "baseline, message",
    [
        (["one line"], "has 1 lines but reference file"),
        ([], "is empty"),
    ],
)
def test_bleu_cli_rejects_a_baseline_that_does_not_fit_and_writes_nothing(tmp_path, spanish_verses, baseline, message):
    ref = write_lines(tmp_path / "ref.es", spanish_verses[:5])
    system = write_lines(tmp_path / "sys.es", degraded(spanish_verses[:5]))
    base = write_lines(tmp_path / "base.es", baseline)
    result = score_spanish(system, ref, "--paired", str(base), "--json", str(tmp_path / "out.json"))
    assert result.returncode == 2 and message in result.stderr and "baseline hypothesis file" in result.stderr
    assert result.stdout == "" and not (tmp_path / "out.json").exists()


def test_bleu_cli_paired_reads_fairseq_output_for_both_systems(tmp_path, spanish_verses):
    ref = write_lines(tmp_path / "ref.es", spanish_verses[:4])
    system = write_lines(tmp_path / "sys.txt", [f"H-{i}\t-0.5\t{line}" for i, line in enumerate(spanish_verses[:4])])
    baseline = write_lines(
        tmp_path / "base.txt", [f"H-{i}\t-0.5\t{line}" for i, line in enumerate(spanish_verses[:4]) if i != 2]
    )
    result = score_spanish(system, ref, "--hyp-format", "fairseq", "--paired", str(baseline))
    assert result.returncode == 2 and f"{baseline}: no H- line for 1 of 4 sentences, ids 2" in result.stderr


@pytest.mark.parametrize("option", ["--paired-samples", "--paired-seed"])
def test_paired_options_must_be_positive(tmp_path, option):
    result = run_score("--hyp", "h", "--ref", "r", "--lang", "es", "--paired", "b", option, "0")
    assert result.returncode == 2 and "must be a positive whole number" in result.stderr


def test_check_same_length_names_both_outputs():
    with pytest.raises(PairedInputError, match="a.txt has 2 lines but the baseline b.txt has 1"):
        check_same_length([1, 2], [1], "a.txt", "b.txt")


def summary(f_score: float) -> dict[str, Score]:
    return {name: Score(precision=f_score, recall=f_score, fmeasure=f_score) for name in rouge.ROUGE_TYPES}


def test_rouge_resample_score_is_the_mean_over_drawn_summaries():
    system = [summary(value) for value in (0.1, 0.5, 0.9)]
    baseline = [summary(value) for value in (0.2, 0.2, 0.2)]
    report = rouge.paired_test(system, baseline, n_samples=200, seed=3)
    indices = resample_indices(3, 200, seed=3)
    resampled = 100 * np.array([0.1, 0.5, 0.9])[indices].mean(axis=1)
    expected = compare("ROUGE-2 R", 50.0, 20.0, resampled, np.full(200, 20.0))
    assert len(report.comparisons) == 12
    got = report["ROUGE-2 R"]
    assert got.system.score == pytest.approx(50.0) and got.baseline.score == pytest.approx(20.0)
    assert (got.system.mean, got.system.half_width, got.p_value) == pytest.approx(
        (expected.system.mean, expected.system.half_width, expected.p_value)
    )
    assert got.baseline.half_width == pytest.approx(0.0)


REFERENCES = [
    "The storm hit Texas . Power was cut for days .",
    "Shares rose 5 percent . Sales were strong .",
    "The team won the cup . Fans celebrated .",
    "Rain is expected . Roads may flood .",
]
SYSTEM = [
    "The storm hit Texas. Power was cut.",
    "Shares rose 5 percent on strong sales.",
    "The team won the cup.",
    "Rain is expected and roads may flood.",
]
BASELINE = ["A storm.", "Shares rose.", "The team won.", "Rain."]


def test_rouge_cli_paired_writes_every_variant_with_p_values_to_json(tmp_path):
    paths = {
        name: write_lines(tmp_path / f"{name}.txt", lines)
        for name, lines in (("ref", REFERENCES), ("sys", SYSTEM), ("base", BASELINE))
    }
    result = run_metric(
        "rouge",
        "--hyp",
        str(paths["sys"]),
        "--ref",
        str(paths["ref"]),
        "--paired",
        str(paths["base"]),
        "--paired-samples",
        "300",
        "--json",
        str(tmp_path / "out.json"),
    )
    assert result.returncode == 0, result.stderr
    payload = json.loads((tmp_path / "out.json").read_text())
    paired = payload["paired"]
    assert (paired["samples"], paired["seed"], paired["baseline"]) == (300, 12345, str(paths["base"]))
    assert set(paired["metrics"]) == {
        f"{name} {m}" for name in ("ROUGE-1", "ROUGE-2", "ROUGE-L", "ROUGE-Lsum") for m in ("F1", "P", "R")
    }
    f1 = paired["metrics"]["ROUGE-1 F1"]
    assert f1["system"] == pytest.approx(payload["scores"]["rouge1"]["fmeasure"]["mean"])
    assert f1["difference"] > 0 and 0 < f1["p_value"] <= 1
    assert "ROUGE-Lsum F1" in result.stdout and "paired bootstrap, 300 resamples, seed 12345" in result.stdout


@pytest.mark.parametrize("baseline, message", [(BASELINE[:3], "has 4 lines but the baseline"), ([], "is empty")])
def test_rouge_cli_rejects_a_baseline_that_does_not_fit_and_writes_nothing(tmp_path, baseline, message):
    ref, system = write_lines(tmp_path / "ref.txt", REFERENCES), write_lines(tmp_path / "sys.txt", SYSTEM)
    base = write_lines(tmp_path / "base.txt", baseline)
    result = run_metric(
        "rouge", "--hyp", str(system), "--ref", str(ref), "--paired", str(base), "--json", str(tmp_path / "out.json")
    )
    assert result.returncode == 2 and message in result.stderr and str(base) in result.stderr
    assert result.stdout == "" and not (tmp_path / "out.json").exists()
