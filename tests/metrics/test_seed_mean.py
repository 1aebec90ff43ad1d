"""Seed-mean paired bootstrap (ode_seq.metrics.seed_mean) and the distillation table built on it."""

from __future__ import annotations

import gzip
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest
from sacrebleu.metrics import BLEU

from ode_seq.metrics.bleu import paired_test, sacrebleu_paired_bs
from ode_seq.metrics.paired_bootstrap import PairedInputError
from ode_seq.metrics.seed_mean import seed_mean_paired_test

REPO = Path(__file__).resolve().parents[2]
TABLE = REPO / "examples" / "distillation" / "baseline_table.py"


@pytest.fixture(scope="module")
def references() -> list[str]:
    with gzip.open(REPO / "examples/translation/data/test.tsv.gz", "rt", encoding="utf-8") as f:
        return [line.rstrip("\n").split("\t")[2] for line in f][1:81]


def dropping(references: list[str], every: int, offset: int = 0) -> list[str]:
    """'Translations' that leave out every `every`-th word."""
    return [
        " ".join(w for j, w in enumerate(line.split()) if (i + j + offset) % every != every - 1)
        for i, line in enumerate(references)
    ]


def test_one_seed_is_sacrebleus_paired_bootstrap(references):
    system, baseline = dropping(references, 5), dropping(references, 4)
    ours = seed_mean_paired_test([system], [baseline], references, n_samples=300, seed=11)
    theirs, theirs_baseline, _ = sacrebleu_paired_bs(BLEU(), system, baseline, references, 300, 11)
    assert (ours.system.score, ours.baseline.score) == pytest.approx((theirs.score, theirs_baseline.score))
    assert ours.p_value == pytest.approx(theirs.p_value)
    assert (ours.system.mean, ours.system.half_width) == pytest.approx((theirs.mean, theirs.ci))
    assert (ours.baseline.mean, ours.baseline.half_width) == pytest.approx((theirs_baseline.mean, theirs_baseline.ci))


def test_seed_mean_averages_each_seeds_bleu_on_shared_resamples(references):
    systems = [dropping(references, 5), dropping(references, 5, offset=2)]
    baselines = [dropping(references, 4), dropping(references, 3)]
    mean = seed_mean_paired_test(systems, baselines, references, n_samples=200)
    singles = [seed_mean_paired_test([s], [b], references, n_samples=200) for s, b in zip(systems, baselines)]
    assert mean.system.score == pytest.approx((singles[0].system.score + singles[1].system.score) / 2)
    assert mean.difference == pytest.approx((singles[0].difference + singles[1].difference) / 2)
    # Shared draws: the resampled means average too.
    assert mean.system.mean == pytest.approx((singles[0].system.mean + singles[1].system.mean) / 2)
    twice = seed_mean_paired_test([systems[0]] * 2, [baselines[0]] * 2, references, n_samples=200)
    assert (twice.system, twice.baseline, twice.p_value) == (singles[0].system, singles[0].baseline, singles[0].p_value)


def test_outputs_must_pair_up(references):
    with pytest.raises(PairedInputError, match="2 systems for 1 baselines"):
        seed_mean_paired_test([references, references], [references], references)
    with pytest.raises(PairedInputError, match="an output of 3 lines for 80 references"):
        seed_mean_paired_test([references[:3]], [references], references)


def fairseq_output(path: Path, lines: list[str], skip: int | None = None) -> Path:
    path.write_text(
        "".join(f"S-{i}\tsource\nH-{i}\t-0.4\t{line}\n" for i, line in enumerate(lines) if i != skip), encoding="utf-8"
    )
    return path


def load_table():
    spec = importlib.util.spec_from_file_location("baseline_table", TABLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_distillation_table_rows_are_the_paired_tests(tmp_path, references):
    runs = {
        (seed, kind): fairseq_output(tmp_path / f"{kind}{seed}.txt", dropping(references, every, seed))
        for seed, kind, every in ((1, "distilled", 6), (1, "scratch", 3), (2, "distilled", 5), (2, "scratch", 4))
    }
    text = load_table().table(references, "es", [(s, runs[s, "distilled"], runs[s, "scratch"]) for s in (1, 2)])
    rows = [line.strip("|").split(" | ") for line in text.splitlines() if line.startswith("| ")][1:]
    for cells, seed in zip(rows, (1, 2)):
        report, _ = paired_test(
            dropping(references, (6, 5)[seed - 1], seed),
            dropping(references, (3, 4)[seed - 1], seed),
            references,
            "es",
            hypotheses_tokenised=True,
            tokenizers=("13a",),
        )
        comparison = report.comparisons[0]
        assert [c.strip() for c in cells] == [
            str(seed),
            str(comparison.system),
            str(comparison.baseline),
            f"{comparison.difference:+.2f}",
            f"{comparison.p_value:.4f}",
        ]
    assert rows[2][0].strip() == "mean ± sd" and len(rows) == 3
    assert text.startswith("80 test sentences; every run translated each of them.")


def test_distillation_table_refuses_a_run_that_skipped_a_sentence(tmp_path, references):
    distilled = fairseq_output(tmp_path / "d.txt", references)
    scratch = fairseq_output(tmp_path / "s.txt", references, skip=7)
    ref = tmp_path / "ref.es"
    ref.write_text("".join(line + "\n" for line in references), encoding="utf-8")
    result = subprocess.run(
        [sys.executable, str(TABLE), "--ref", str(ref), "--pair", "1", str(distilled), str(scratch)],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 2 and result.stdout == ""
    assert f"{scratch}: no H- line for 1 of 80 sentences, ids 7" in result.stderr
