"""MaxMatch (M2) scorer: hand-worked cases, the official scorer's two published examples, bad input.

Expected counts are (correct C, proposed E, gold G); P = C/E, R = C/G, F0.5 = 1.25PR/(0.25P+R).
Every expectation here was also checked against the official (Python 2) M2Scorer 3.2.
"""

import random
import subprocess
import sys
from pathlib import Path
from typing import Tuple

import pytest

from ode_seq.metrics.m2 import EditCounts, M2Scorer, main
from ode_seq.metrics.m2_align import align_edits
from ode_seq.metrics.m2_format import GoldEdit, M2FormatError, apply_edits, format_block, parse_m2, read_m2
from ode_seq.metrics.m2_lattice import EditLattice

REPO = Path(__file__).resolve().parents[2]

# The official scorer's example (its README): gold file, `system` and `system2` outputs.
OFFICIAL_GOLD = """S The cat sat at mat .
A 3 4|||Prep|||on|||REQUIRED|||-NONE-|||0
A 4 4|||ArtOrDet|||the||a|||REQUIRED|||-NONE-|||0

S The dog .
A 1 2|||NN|||dogs|||REQUIRED|||-NONE-|||0
A -1 -1|||noop|||-NONE-|||-NONE-|||-NONE-|||1

S Giant otters is an apex predator .
A 2 3|||SVA|||are|||REQUIRED|||-NONE-|||0
A 3 4|||ArtOrDet|||-NONE-|||REQUIRED|||-NONE-|||0
A 5 6|||NN|||predators|||REQUIRED|||-NONE-|||0
A 1 2|||NN|||otter|||REQUIRED|||-NONE-|||1
"""
OFFICIAL_SYSTEM = ["A cat sat on the mat .", "The dog .", "Giant otters are apex predator ."]
OFFICIAL_SYSTEM2 = ["A cat sat on mat .", "The dog .", "Giant otters are apex predator ."]


def score(m2_text: str, hypotheses, **options) -> EditCounts:
    return M2Scorer(**options).score(hypotheses, parse_m2(m2_text.split("\n")))


def edits_of(counts: EditCounts) -> Tuple[int, int, int]:
    """(correct, proposed, gold) edits."""
    return counts.correct, counts.proposed, counts.gold


def edits(m2_text: str, hypotheses, **options) -> Tuple[int, int, int]:
    """(correct, proposed, gold) edits of ``hypotheses`` against the M2 gold ``m2_text``."""
    return edits_of(score(m2_text, hypotheses, **options))


def run_cli(tmp_path: Path, m2_text: str, hypotheses, *options: str) -> subprocess.CompletedProcess:
    gold, system = tmp_path / "gold.m2", tmp_path / "system.txt"
    gold.write_text(m2_text, encoding="utf-8")
    system.write_text("".join(h + "\n" for h in hypotheses), encoding="utf-8")
    return subprocess.run(
        [sys.executable, "-m", "ode_seq.metrics.m2", str(system), str(gold), *options],
        cwd=REPO,
        capture_output=True,
        text=True,
    )


def a_line(start, end, correction, annotator=0, error_type="X"):
    return f"A {start} {end}|||{error_type}|||{correction}|||REQUIRED|||-NONE-|||{annotator}"


def test_official_example_gives_precision_recall_f05_of_080(tmp_path):
    assert edits(OFFICIAL_GOLD, OFFICIAL_SYSTEM) == (4, 5, 5)
    result = run_cli(tmp_path, OFFICIAL_GOLD, OFFICIAL_SYSTEM)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "Precision   : 0.8000\nRecall      : 0.8000\nF_0.5       : 0.8000\n"


def test_official_system2_example_gives_p075_r060_f05_07143(tmp_path):
    # Sentence 1: "The cat sat -> A cat sat" (one edit with two unchanged words, not gold) and
    # at -> on (gold); sentence 2: annotator 1 (noop) wins; sentence 3: annotator 0, 2 of 3.
    assert edits(OFFICIAL_GOLD, OFFICIAL_SYSTEM2) == (3, 4, 5)
    result = run_cli(tmp_path, OFFICIAL_GOLD, OFFICIAL_SYSTEM2)
    assert result.stdout == "Precision   : 0.7500\nRecall      : 0.6000\nF_0.5       : 0.7143\n"


def test_insertion_matching_gold_counts_one_correct_edit():
    counts = score("S He went to school .\n" + a_line(3, 3, "the"), ["He went to the school ."])
    assert edits_of(counts) == (1, 1, 1)
    assert counts.f_score(0.5) == 1.0


@pytest.mark.parametrize("gold_span", [(1, 2), (2, 3)])
def test_deleting_a_repeated_word_matches_gold_on_either_copy(gold_span):
    # "is is" -> "is": both alignments are in the lattice, the one the gold names is chosen.
    assert edits("S She is is happy .\n" + a_line(*gold_span, "-NONE-"), ["She is happy ."]) == (1, 1, 1)


def test_multi_token_replacement_is_one_edit_when_gold_is_one_edit():
    text = "S He look at in the mirror .\n" + a_line(1, 4, "looked into")
    assert edits(text, ["He looked into the mirror ."]) == (1, 1, 1)


def test_multi_token_replacement_splits_when_gold_splits():
    text = "S He look at in the mirror .\n" + a_line(1, 2, "looked") + "\n" + a_line(2, 4, "into")
    assert edits(text, ["He looked into the mirror ."]) == (2, 2, 2)


def test_one_of_two_gold_edits_gives_recall_half_and_f05_five_sixths():
    text = "S I has a apple .\n" + a_line(1, 2, "have") + "\n" + a_line(2, 3, "an")
    counts = score(text, ["I have a apple ."])
    assert edits_of(counts) == (1, 1, 2)
    assert counts.precision == 1.0 and counts.recall == 0.5
    assert counts.f_score(0.5) == pytest.approx(1.25 * 0.5 / (0.25 + 0.5))  # 0.8333
    assert counts.f_score(1.0) == pytest.approx(2 / 3)


def test_any_alternative_correction_of_a_gold_edit_is_correct():
    assert edits("S I ate a apple .\n" + a_line(2, 3, "an||one"), ["I ate one apple ."]) == (1, 1, 1)


def test_overlapping_gold_edits_can_only_both_count_as_gold():
    # Gold 0:2 a b -> x and 1:3 b c -> y overlap; "x c" realises the first only.
    text = "S a b c\n" + a_line(0, 2, "x") + "\n" + a_line(1, 3, "y")
    assert edits(text, ["x c"]) == (1, 1, 2)


def test_two_gold_insertions_at_one_position_are_both_matched():
    text = "S I saw cat .\n" + a_line(2, 2, "the") + "\n" + a_line(2, 2, "big")
    assert edits(text, ["I saw the big cat ."]) == (2, 2, 2)


def test_empty_hypothesis_of_a_correct_sentence_is_one_deletion_edit():
    # Four deletions merge into one edit (no unchanged words between them): C=0, E=1, G=0.
    counts = score("S This is fine .\nA -1 -1|||noop|||-NONE-|||REQUIRED|||-NONE-|||0", [""])
    assert edits_of(counts) == (0, 1, 0)
    assert (counts.precision, counts.recall, counts.f_score(0.5)) == (0.0, 1.0, 0.0)


def test_empty_hypothesis_still_matches_a_gold_deletion():
    # The gold deletion of "b" is taken as its own edit; "A" and "." are deleted around it.
    assert edits("S A b .\n" + a_line(1, 2, "-NONE-"), [""]) == (1, 3, 1)


def test_unchanged_hypothesis_has_precision_one_recall_zero():
    counts = score("S I has it .\n" + a_line(1, 2, "have"), ["I has it ."])
    assert edits_of(counts) == (0, 0, 1)
    assert (counts.precision, counts.recall, counts.f_score(0.5)) == (1.0, 0.0, 0.0)


def test_noop_annotator_is_chosen_for_an_unchanged_hypothesis():
    text = "S I has it .\n" + a_line(1, 2, "have", 0) + "\nA -1 -1|||noop|||-NONE-|||REQUIRED|||-NONE-|||1"
    counts = score(text, ["I has it ."])
    assert edits_of(counts) == (0, 0, 0)
    assert (counts.precision, counts.recall, counts.f_score(0.5)) == (1.0, 1.0, 1.0)


def test_best_annotator_is_chosen_per_sentence_by_running_f():
    # Sentence 1: annotator 1 (go -> went) gives (1,1,1), annotator 0 (go -> goes) gives (0,1,1).
    # Sentence 2: annotator 0 gives running (2,2,2), F=1; the noop annotator 1 gives (1,2,1), F=0.56.
    text = (
        "S He go home .\n" + a_line(1, 2, "goes", 0) + "\n" + a_line(1, 2, "went", 1) + "\n\n"
        "S She like tea .\n" + a_line(1, 2, "likes", 0) + "\nA -1 -1|||noop|||-NONE-|||REQUIRED|||-NONE-|||1"
    )
    assert edits(text, ["He went home .", "She likes tea ."]) == (2, 2, 2)
    assert edits(text, ["He went home .", "She likes tea ."], annotator=0) == (1, 2, 2)


def test_edits_within_max_unchanged_words_merge_into_one():
    # a b c d e -> X b c Y e: without gold, one edit "a b c d -> X b c Y" (2 unchanged words).
    assert score("S a b c d e", ["X b c Y e"]).proposed == 1
    assert score("S a b c d e", ["X b c Y e"], max_unchanged_words=1).proposed == 2
    text = "S a b c d e\n" + a_line(0, 1, "X") + "\n" + a_line(3, 4, "Y")
    assert edits(text, ["X b c Y e"]) == (2, 2, 2)


def test_ignore_whitespace_casing_drops_case_only_edits():
    assert score("S the cat .", ["The cat ."]).proposed == 1
    assert score("S the cat .", ["The cat ."], ignore_whitespace_casing=True).proposed == 0


def test_gold_edits_are_consumed_in_file_order_as_official():
    # Gold lists 2:3 before 0:1; after matching 0:1 (second in file) the pointer is past 2:3.
    text = "S a b c\n" + a_line(2, 3, "y") + "\n" + a_line(0, 1, "x")
    assert edits(text, ["x b y"]) == (1, 2, 2)


def test_duplicate_gold_edits_each_count_as_official():
    text = "S a b c\n" + a_line(0, 1, "x") + "\n" + a_line(0, 1, "x")
    assert edits(text, ["x b c"]) == (2, 1, 2)


def test_sentence_without_annotations_counts_as_no_gold_edits():
    assert edits("S Fine .\n\nS Also fine .", ["Fine .", "Also good ."]) == (0, 1, 0)


def test_lattice_edit_sequence_of_a_substitution_and_an_insertion():
    lattice = EditLattice("I has apple .".split(), "I have an apple .".split())
    gold = parse_m2(["S I has apple .", a_line(1, 2, "have"), a_line(2, 2, "an")])[0].edits_of(0)
    assert [(e.start, e.end, e.original, e.correction) for e in lattice.best_edits(gold)] == [
        (1, 2, "has", "have"),
        (2, 2, "", "an"),
    ]


def test_beta_option_changes_the_reported_f(tmp_path):
    text = "S I has a apple .\n" + a_line(1, 2, "have") + "\n" + a_line(2, 3, "an") + "\n"
    result = run_cli(tmp_path, text, ["I have a apple ."], "--beta", "1")
    assert result.stdout.splitlines()[2] == "F_1.0       : 0.6667"


def test_verbose_output_names_the_chosen_annotator(tmp_path):
    result = run_cli(tmp_path, OFFICIAL_GOLD, OFFICIAL_SYSTEM2, "-v")
    assert ">> chosen annotator for sentence 2: 1" in result.stdout
    assert "CORRECT EDITS  : 3\nPROPOSED EDITS : 4\nGOLD EDITS     : 5" in result.stdout


def test_apply_edits_builds_the_corrected_sentence_and_skips_overlaps():
    sentence = parse_m2(["S I has apple .", a_line(1, 2, "have"), a_line(2, 2, "an"), a_line(1, 3, "x")])[0]
    target, skipped = apply_edits(sentence.source, sentence.edits_of(0))
    assert (" ".join(target), skipped) == ("I have an apple .", 1)


def test_aligned_edits_rebuild_the_target():
    rng = random.Random(0)
    for _ in range(300):
        source = [rng.choice("abcde") for _ in range(rng.randint(0, 8))]
        target = [rng.choice("abcdef") for _ in range(rng.randint(0, 8))]
        edits = align_edits(source, target)
        rebuilt, skipped = apply_edits(source, [GoldEdit(s, e, (c,)) for s, e, _, c in edits])
        assert (rebuilt, skipped) == (target, 0)


def test_gold_insertion_can_be_claimed_by_a_parallel_edge_as_official():
    # The official two-pointer assignment of gold insertions at position 4 rewards an insertion
    # edge of another alignment, so the gold target itself scores (2, 3, 3), as in M2Scorer 3.2.
    text = format_block("c b c a".split(), {0: [(0, 0, "M", "d a"), (1, 3, "R", "e a e"), (4, 4, "M", "e")]})
    lattice = EditLattice("c b c a".split(), "d a c e a e a e".split())
    system = lattice.best_edits(parse_m2(text.split("\n"))[0].edits_of(0))
    assert [(e.start, e.end, e.correction) for e in system] == [(0, 0, "d a"), (1, 3, "e a e"), (3, 4, "a e")]
    assert edits(text, ["d a c e a e a e"]) == (2, 3, 3)


def test_aligned_edits_merge_adjacent_changes_and_type_them():
    assert align_edits("I has apple .".split(), "I have an apple .".split()) == [(1, 2, "R", "have an")]
    assert align_edits("a b c".split(), "a c".split()) == [(1, 2, "U", "")]
    assert align_edits("a c".split(), "a b c".split()) == [(1, 1, "M", "b")]


@pytest.mark.parametrize(
    "bad_line, message",
    [
        ("A 1 2|||SVA|||have|||REQUIRED|||0", "needs 6 '|||'-separated fields"),
        ("A one 2|||SVA|||have|||REQUIRED|||-NONE-|||0", "span must be two integers"),
        ("A 1 2|||SVA|||have|||REQUIRED|||-NONE-|||first", "annotator id must be an integer"),
        ("A 3 9|||SVA|||have|||REQUIRED|||-NONE-|||0", "span 3 9 lies outside the sentence's 4 tokens"),
        ("X 1 2|||SVA|||have|||REQUIRED|||-NONE-|||0", "expected a line starting with 'S ' or 'A '"),
    ],
)
def test_malformed_m2_line_is_reported_with_file_and_line(tmp_path, bad_line, message):
    path = tmp_path / "bad.m2"
    path.write_text(f"S Fine .\n\nS I has it .\n{bad_line}\n", encoding="utf-8")
    with pytest.raises(M2FormatError) as error:
        read_m2(str(path))
    assert str(error.value).startswith(f"{path}:4: ")
    assert message in str(error.value)


def test_cli_reports_malformed_m2_and_exits_nonzero(tmp_path):
    result = run_cli(tmp_path, "S I has it .\nA 1 2|||SVA|||have\n", ["I have it ."])
    assert result.returncode == 1
    assert f"{tmp_path / 'gold.m2'}:2: an A line needs 6" in result.stderr
    assert result.stdout == ""


def test_cli_rejects_hypothesis_count_different_from_m2_sentences(tmp_path):
    result = run_cli(tmp_path, OFFICIAL_GOLD, OFFICIAL_SYSTEM[:2])
    assert result.returncode == 1
    assert "has 2 hypothesis lines but" in result.stderr and "has 3 sentences" in result.stderr


def test_cli_rejects_unknown_annotator_id(tmp_path):
    result = run_cli(tmp_path, OFFICIAL_GOLD, OFFICIAL_SYSTEM, "--annotator", "7")
    assert result.returncode == 1
    assert "unknown annotator id 7" in result.stderr and "has annotator ids 0, 1" in result.stderr


@pytest.mark.parametrize("beta", ["nan", "inf", "-1"])
def test_cli_refuses_a_beta_that_is_not_a_finite_non_negative_number(tmp_path, beta):
    result = run_cli(tmp_path, OFFICIAL_GOLD, OFFICIAL_SYSTEM, "--beta", beta)
    assert result.returncode == 2
    assert f"--beta must be a finite number >= 0, got {float(beta)}" in result.stderr and result.stdout == ""


def test_score_rejects_mismatched_lengths_in_the_library_api():
    with pytest.raises(ValueError, match="2 hypotheses for 3 M2 sentences"):
        M2Scorer().score(OFFICIAL_SYSTEM[:2], parse_m2(OFFICIAL_GOLD.split("\n")))


def test_main_returns_zero_and_prints_three_lines(tmp_path, capsys):
    gold, system = tmp_path / "g.m2", tmp_path / "s.txt"
    gold.write_text(OFFICIAL_GOLD, encoding="utf-8")
    system.write_text("\n".join(OFFICIAL_SYSTEM) + "\n", encoding="utf-8")
    assert main([str(system), str(gold)]) == 0
    assert capsys.readouterr().out.count("\n") == 3
