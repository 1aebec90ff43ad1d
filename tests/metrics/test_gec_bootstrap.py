"""Paired bootstrap of M2 and ERRANT (ode_seq.metrics.gec_bootstrap): every resample is scored as
the scorer scores that resampled corpus, per-sentence choice of annotator included."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ode_seq.metrics.gec_bootstrap import resampled_totals
from ode_seq.metrics.m2 import EditCounts, M2Scorer
from ode_seq.metrics.m2_format import format_block, parse_m2
from ode_seq.metrics.paired_bootstrap import resample_indices
from tests.metrics.cli import run_metric

REPO = Path(__file__).resolve().parents[2]


def sentences_of(blocks: list[str]):
    return parse_m2("\n\n".join(blocks).split("\n"))


def test_m2_choice_depends_on_the_sentences_before_it_as_computed_by_hand():
    # X: annotator 0 has no edits, annotator 1 seven; the hypothesis fixes only the first token, so
    # the candidates are (C, E, G) = (0, 1, 0) and (1, 1, 7). Y: one annotator, all 3 edits fixed.
    x = format_block(
        "a b c d e f g h".split(), {0: [], 1: [(i, i + 1, "X", t.upper()) for i, t in enumerate("abcdefg")]}
    )
    y = format_block("p q r s".split(), {0: [(i, i + 1, "X", t.upper()) for i, t in enumerate("pqr")]})
    hypotheses = ["A b c d e f g h", "P Q R s"]
    scorer = M2Scorer()
    candidates = scorer.candidates(hypotheses, sentences_of([x, y]))
    assert candidates.counts.tolist() == [[[0, 1, 0], [1, 1, 7]], [[3, 3, 3], [0, 0, 0]]]
    totals = resampled_totals(candidates, np.array([[0, 0], [0, 1], [1, 0], [1, 1]]), scorer.choice_key)
    # [X, X]: F(1,1,7) = 0.45 beats F(0,1,0) = 0, then F(2,2,14) = 0.45 beats F(1,2,7) = 0.33.
    # [X, Y]: annotator 1 for X, then Y. [Y, X]: after (3,3,3), F(3,4,3) = 0.79 beats F(4,4,10) = 0.77.
    assert totals.tolist() == [[2, 2, 14], [4, 4, 10], [3, 4, 3], [6, 6, 6]]


def random_corpus(seed: int, size: int) -> tuple[list[str], list[str], list[str]]:
    """M2 blocks with two annotators (annotator 1 often marks many more edits, so that which one fits
    best depends on the running totals) and two systems' hypotheses."""
    rng = np.random.default_rng(seed)
    blocks, systems = [], ([], [])
    for number in range(size):
        source = [f"w{number}.{i}" for i in range(12)]
        first = sorted(rng.choice(12, size=rng.integers(0, 3), replace=False).tolist())
        second = sorted(set(first) | set(rng.choice(12, size=rng.integers(0, 9), replace=False).tolist()))
        blocks.append(
            format_block(
                source, {0: [(i, i + 1, "X", f"c{i}") for i in first], 1: [(i, i + 1, "X", f"c{i}") for i in second]}
            )
        )
        for hypotheses in systems:
            fixed = {i for i in second if rng.random() < 0.5}
            spurious = {int(i) for i in rng.choice(12, size=rng.integers(0, 2))} - set(second)
            hypotheses.append(
                " ".join(
                    f"c{i}" if i in fixed else f"z{i}" if i in spurious else token for i, token in enumerate(source)
                )
            )
    return blocks, *systems


def test_m2_resample_totals_equal_the_scorer_on_each_resampled_corpus():
    blocks, hypotheses, _ = random_corpus(seed=0, size=40)
    sentences = sentences_of(blocks)
    scorer = M2Scorer()
    candidates = scorer.candidates(hypotheses, sentences)
    indices = np.vstack([np.arange(40), resample_indices(40, 25, seed=1)])
    totals = resampled_totals(candidates, indices, scorer.choice_key)
    order_free = []
    for row, total in zip(indices, totals):
        counts = scorer.score([hypotheses[i] for i in row], [sentences[i] for i in row])
        assert tuple(total) == (counts.correct, counts.proposed, counts.gold)
        chosen = [scorer.choose(scorer.sentence_results(hypotheses[i], sentences[i]), EditCounts()).counts for i in row]
        order_free.append(sum(chosen, EditCounts()))
    assert any(tuple(t) != (c.correct, c.proposed, c.gold) for t, c in zip(totals, order_free)), (
        "the corpus should make some choice depend on the sentences before it"
    )


def test_m2_paired_test_reports_the_scorers_corpus_scores():
    blocks, system, baseline = random_corpus(seed=2, size=30)
    sentences = sentences_of(blocks)
    scorer = M2Scorer()
    report = scorer.paired_test(system, baseline, sentences, n_samples=100, seed=5, names=("s", "b"))
    assert [c.metric for c in report.comparisons] == ["M2 P", "M2 R", "M2 F0.5"]
    for hypotheses, side in ((system, "system"), (baseline, "baseline")):
        counts = scorer.score(hypotheses, sentences)
        scores = [getattr(report[f"M2 {m}"], side).score for m in ("P", "R", "F0.5")]
        assert scores == pytest.approx([100 * counts.precision, 100 * counts.recall, 100 * counts.f_score(0.5)])
    assert 0 < report["M2 F0.5"].p_value <= 1 and report["M2 F0.5"].system.half_width > 0


def write(path: Path, text: str) -> str:
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_m2_cli_paired_prints_p_r_f_with_p_values(tmp_path):
    blocks, system, baseline = random_corpus(seed=3, size=20)
    gold = write(tmp_path / "gold.m2", "\n\n".join(blocks) + "\n")
    hyp, base = (
        write(tmp_path / "sys.txt", "\n".join(system) + "\n"),
        write(tmp_path / "base.txt", "\n".join(baseline) + "\n"),
    )
    result = run_metric("m2", hyp, gold, "--paired", base, "--paired-samples", "200", "--paired-seed", "9")
    assert result.returncode == 0, result.stderr
    report = M2Scorer().paired_test(system, baseline, sentences_of(blocks), 200, 9, (hyp, base))
    assert result.stdout.endswith("\n".join(report.lines()) + "\n")
    assert f"paired bootstrap, 200 resamples, seed 9: system {hyp} against baseline {base}" in result.stdout
    same = run_metric("m2", hyp, gold, "--paired", hyp)
    assert same.stdout.splitlines()[-1].endswith("+0.00  1.0000")


def test_m2_cli_rejects_a_baseline_with_another_line_count(tmp_path):
    blocks, system, baseline = random_corpus(seed=3, size=5)
    gold = write(tmp_path / "gold.m2", "\n\n".join(blocks) + "\n")
    hyp, base = (
        write(tmp_path / "sys.txt", "\n".join(system) + "\n"),
        write(tmp_path / "base.txt", "\n".join(baseline[:4]) + "\n"),
    )
    result = run_metric("m2", hyp, gold, "--paired", base)
    assert result.returncode == 1 and result.stdout == ""
    assert f"{base} has 4 hypothesis lines but {gold} has 5 sentences" in result.stderr


class TestErrant:
    errant_score = pytest.importorskip("ode_seq.metrics.errant_score")

    @staticmethod
    def hypothesis_blocks(reference_blocks: list[str], hypotheses: list[str]) -> list[str]:
        """The hypotheses' edits as errant writes them (substitutions of one token here)."""
        blocks = []
        for reference, hypothesis in zip(reference_blocks, hypotheses):
            source = reference.split("\n")[0][2:].split()
            edits = [
                (i, i + 1, "R:NOUN", new) for i, (old, new) in enumerate(zip(source, hypothesis.split())) if old != new
            ]
            blocks.append(format_block(source, {0: edits}))
        return blocks

    def test_python_round_equals_pythons_round_next_to_ties_too(self):
        values = np.concatenate(
            [np.random.default_rng(0).random(2000), (np.arange(10000) + 0.5) / 10000, [0.5, 0.00005, 0.99995, 1.0, 0.0]]
        )
        assert self.errant_score.python_round(values, 4).tolist() == [round(float(v), 4) for v in values]

    def test_choice_compares_f_rounded_to_four_places_as_errant_does(self):
        # After (TP, FP, FN) = (6, 1, 1), reference 0 gives (3, 1, 0) and reference 1 (4, 0, 5): both make
        # F0.5 = 0.8333 (0.83333333333333337 against …26 unrounded), so errant takes the one with more TP.
        references = [
            format_block([f"t{i}" for i in range(10)], {0: [(i, i + 1, "X", f"c{i}") for i in range(7)]}),
            format_block(
                [f"u{i}" for i in range(12)],
                {0: [(i, i + 1, "X", f"c{i}") for i in range(3)], 1: [(i, i + 1, "X", f"c{i}") for i in range(9)]},
            ),
        ]
        hypotheses = [
            " ".join(["c0", "c1", "c2", "c3", "c4", "c5", "z6", "t7", "t8", "t9"]),
            " ".join(["c0", "c1", "c2", "c3"] + [f"u{i}" for i in range(4, 12)]),
        ]
        blocks = self.hypothesis_blocks(references, hypotheses)
        score = self.errant_score.compare(blocks, references)
        assert (score.tp, score.fp, score.fn) == (10, 1, 6)
        candidates = self.errant_score.candidate_counts(blocks, references)
        assert candidates.counts[1].tolist() == [[3, 1, 0], [4, 0, 5]]
        totals = resampled_totals(candidates, np.array([[0, 1]]), self.errant_score.choice_key(0.5))
        assert totals.tolist() == [[10, 1, 6]]

    def test_resample_totals_equal_errant_compare_on_each_resampled_corpus(self):
        references, hypotheses, _ = random_corpus(seed=4, size=40)
        blocks = self.hypothesis_blocks(references, hypotheses)
        candidates = self.errant_score.candidate_counts(blocks, references)
        indices = np.vstack([np.arange(40), resample_indices(40, 25, seed=6)])
        totals = resampled_totals(candidates, indices, self.errant_score.choice_key(0.5))
        for row, total in zip(indices, totals):
            score = self.errant_score.compare([blocks[i] for i in row], [references[i] for i in row])
            assert tuple(total) == (score.tp, score.fp, score.fn)

    def test_paired_test_reports_errants_corpus_scores(self):
        references, system, baseline = random_corpus(seed=7, size=30)
        blocks = [self.hypothesis_blocks(references, lines) for lines in (system, baseline)]
        report = self.errant_score.paired_test(*blocks, references, 0.5, 100, 5, ("s", "b"))
        assert [c.metric for c in report.comparisons] == ["ERRANT P", "ERRANT R", "ERRANT F0.5"]
        for side_blocks, side in zip(blocks, ("system", "baseline")):
            score = self.errant_score.compare(side_blocks, references)
            got = [getattr(report[f"ERRANT {m}"], side).score / 100 for m in ("P", "R", "F0.5")]
            assert got == pytest.approx([score.precision, score.recall, score.f_score], abs=5e-5)
