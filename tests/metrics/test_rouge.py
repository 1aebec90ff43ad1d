"""ROUGE CLI (ode_seq.metrics.rouge) and the offline sentence splitter it feeds ROUGE-Lsum with."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
from rouge_score import rouge_scorer, scoring

from ode_seq.metrics.rouge import score_summaries
from ode_seq.metrics.sentence_split import one_sentence_per_line, split_sentences
from ode_seq.text_files import TextInputError, read_lines
from tests.metrics.cli import run_metric, write_lines

REPO_ROOT = Path(__file__).resolve().parents[2]
TYPES = ["rouge1", "rouge2", "rougeL", "rougeLsum"]

REFERENCES = [
    "Mr. Obama met Dr. Smith in the U.S. capital on Jan. 5 . The talks lasted 3.5 hours .",
    'Police say 12 people were hurt . "We are shocked," the mayor said . Roads reopened at 5 p.m. Sunday .',
    "Apple Inc. shares rose 2.5 percent . The company sold 10 million phones .",
    "J.K. Rowling's new book is out . It sold out in London...",
]
HYPOTHESES = [
    "Obama met Smith in the U.S. capital. Talks lasted 3.5 hours on Jan. 5.",
    'Twelve people were hurt, police say. The mayor said: "We are shocked."',
    "Shares of Apple Inc. rose 2.5 percent after it sold 10 million phones.",
    "",
]


def test_cli_means_and_intervals_equal_rouge_score_called_directly(tmp_path):
    hyp, ref = write_lines(tmp_path / "h.txt", HYPOTHESES), write_lines(tmp_path / "r.txt", REFERENCES)
    result = run_metric(
        "rouge",
        "--hyp",
        str(hyp),
        "--ref",
        str(ref),
        "--json",
        str(tmp_path / "out.json"),
        "--bootstrap-samples",
        "200",
        "--seed",
        "7",
    )
    assert result.returncode == 0, result.stderr
    report = json.loads((tmp_path / "out.json").read_text())

    scorer = rouge_scorer.RougeScorer(TYPES, use_stemmer=True)
    aggregator = scoring.BootstrapAggregator(confidence_interval=0.95, n_samples=200)
    direct = []
    for h, r in zip(HYPOTHESES, REFERENCES):
        direct.append(scorer.score(one_sentence_per_line(r), one_sentence_per_line(h)))
        aggregator.add_scores(direct[-1])
    np.random.seed(7)
    intervals = aggregator.aggregate()

    assert report["num_summaries"] == 4 and report["unit"] == "percent"
    for rouge_type in TYPES:
        for measure in ("precision", "recall", "fmeasure"):
            got = report["scores"][rouge_type][measure]
            mean = 100 * np.mean([getattr(s[rouge_type], measure) for s in direct])
            assert got["mean"] == pytest.approx(mean, abs=1e-9)
            for bound in ("low", "mid", "high"):
                expected = 100 * getattr(getattr(intervals[rouge_type], bound), measure)
                assert got[bound] == pytest.approx(expected, abs=1e-9)
    assert "ROUGE-Lsum" in result.stdout and f"{report['scores']['rouge1']['fmeasure']['mean']:.2f}" in result.stdout


@pytest.mark.parametrize(
    "option, value, message",
    [
        ("--confidence", "1.5", "--confidence must be between 0 and 1 (e.g. 0.95), got 1.5"),
        ("--bootstrap-samples", "0", "--bootstrap-samples must be at least 1, got 0"),
    ],
)
def test_cli_refuses_bootstrap_settings_naming_the_option(tmp_path, option, value, message):
    hyp, ref = write_lines(tmp_path / "h.txt", HYPOTHESES), write_lines(tmp_path / "r.txt", REFERENCES)
    result = run_metric("rouge", "--hyp", str(hyp), "--ref", str(ref), option, value)
    assert result.returncode == 2 and message in result.stderr and result.stdout == ""


def test_lsum_scores_sentences_as_units_while_rouge_l_scores_the_whole_summary():
    scores = score_summaries(
        ["The storm hit Texas. Power was cut."], ["Power was cut. The storm hit Texas."], bootstrap_samples=10
    )
    assert scores["rougeLsum"]["fmeasure"]["mean"] == pytest.approx(100.0)
    # Whole-summary LCS of the swapped sentences keeps only "the storm hit texas" (4 of 7 tokens).
    assert scores["rougeL"]["fmeasure"]["mean"] == pytest.approx(100 * 4 / 7)


def test_stemming_matches_inflected_forms_and_can_be_disabled(tmp_path):
    hyp = write_lines(tmp_path / "h.txt", ["The cats were running"])
    ref = write_lines(tmp_path / "r.txt", ["The cat runs"])
    stemmed = score_summaries(read_lines(hyp), read_lines(ref), bootstrap_samples=10)
    assert stemmed["rouge1"]["fmeasure"]["mean"] == pytest.approx(100 * 2 * (3 / 4) * 1 / (3 / 4 + 1))
    assert (
        run_metric(
            "rouge", "--hyp", str(hyp), "--ref", str(ref), "--no-stemmer", "--json", str(tmp_path / "o.json")
        ).returncode
        == 0
    )
    unstemmed = json.loads((tmp_path / "o.json").read_text())["scores"]["rouge1"]
    assert unstemmed["precision"]["mean"] == pytest.approx(25.0) and unstemmed["recall"]["mean"] == pytest.approx(
        100 / 3
    )


def test_mismatched_counts_are_an_error_and_leave_existing_json_untouched(tmp_path):
    hyp, ref = write_lines(tmp_path / "h.txt", HYPOTHESES[:3]), write_lines(tmp_path / "r.txt", REFERENCES)
    (tmp_path / "out.json").write_text("previous")
    result = run_metric("rouge", "--hyp", str(hyp), "--ref", str(ref), "--json", str(tmp_path / "out.json"))
    assert result.returncode == 2
    assert "3 hypotheses but 4 references" in result.stderr
    assert (tmp_path / "out.json").read_text() == "previous"
    assert sorted(os.listdir(tmp_path)) == ["h.txt", "out.json", "r.txt"]


def test_only_newlines_separate_summaries(tmp_path):
    path = tmp_path / "s.txt"
    path.write_bytes("First summary \u2028 with a line separator .\r\nSecond summary .\n".encode())
    assert read_lines(path) == ["First summary \u2028 with a line separator .", "Second summary ."]
    path.write_bytes(b"First summary .\r\nSecond\rsummary .\n")
    with pytest.raises(TextInputError, match=r"s.txt:2: byte 23: a carriage return"):
        read_lines(path)


def test_splitter_keeps_abbreviations_initials_decimals_and_months_inside_sentences():
    text = (
        "WASHINGTON (CNN) -- Mr. Obama met Dr. Jane Smith and Sen. John McCain on Jan. 5 in the U.S. Capitol. "
        "The deal is worth $3.5 billion, or 2.5 percent of GDP. George W. Bush and J.K. Rowling were not there. "
        "Acme Inc. shares fell. No. 1 seed Serena Williams won. Gov. Andrew Cuomo left at 5 p.m. on Friday."
    )
    assert split_sentences(text) == [
        "WASHINGTON (CNN) -- Mr. Obama met Dr. Jane Smith and Sen. John McCain on Jan. 5 in the U.S. Capitol.",
        "The deal is worth $3.5 billion, or 2.5 percent of GDP.",
        "George W. Bush and J.K. Rowling were not there.",
        "Acme Inc. shares fell.",
        "No. 1 seed Serena Williams won.",
        "Gov. Andrew Cuomo left at 5 p.m. on Friday.",
    ]


def test_splitter_ends_sentences_at_quotes_ellipses_and_abbreviations_before_a_new_sentence():
    text = (
        '"We will rebuild," the mayor said. "Nothing will stop us." Residents were not so sure... '
        "Many left for the U.S. The rest stayed! Was it worth it? \u201cYes,\u201d said one. "
        "She said \u201cno.\u201d Then she left. 10 people died. He paid $5. \u2018It hurts,\u2019 he said."
    )
    assert split_sentences(text) == [
        '"We will rebuild," the mayor said.',
        '"Nothing will stop us."',
        "Residents were not so sure...",
        "Many left for the U.S.",
        "The rest stayed!",
        "Was it worth it?",
        "\u201cYes,\u201d said one.",
        "She said \u201cno.\u201d",
        "Then she left.",
        "10 people died.",
        "He paid $5.",
        "\u2018It hurts,\u2019 he said.",
    ]


def test_splitter_recovers_cnndm_highlights_joined_with_space_period():
    highlights = [
        "Mr. Smith , 45 , was arrested in St. Louis on Jan. 3 .",
        "Police found $2.5 million in cash .",
        "He faces up to 20 years in a U.S. prison .",
        '"I am innocent," he told CNN .',
    ]
    assert split_sentences(" ".join(highlights)) == highlights
    assert one_sentence_per_line(" ".join(highlights)) == "\n".join(highlights)


def test_splitter_treats_line_breaks_as_boundaries_and_drops_blank_lines():
    assert split_sentences("first line without period\n\n  second line  ") == [
        "first line without period",
        "second line",
    ]
