"""Translation BLEU (ode_seq.metrics.bleu) through examples/translation/score.sh."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from ode_seq.metrics.bleu import (
    BleuInputError,
    compound_split,
    read_fairseq_hypotheses,
    score,
    tokenised_bleu,
)
from tests.metrics.cli import run_score, score_spanish, spanish_references, write_lines

SACREBLEU = Path(sys.executable).parent / "sacrebleu"


@pytest.fixture(scope="module")
def spanish_verses() -> list[str]:
    """100 real Spanish references from the bundled corpus."""
    return spanish_references(100)


def degraded(lines: list[str]) -> list[str]:
    """Deterministic imperfect 'translations': every 4th word dropped, one pair of words swapped."""
    out = []
    for i, line in enumerate(lines):
        words = [w for j, w in enumerate(line.split()) if (i + j) % 4 != 3]
        if len(words) > 3:
            words[1], words[2] = words[2], words[1]
        out.append(" ".join(words))
    return out


def test_score_script_equals_sacrebleu_cli_for_13a_and_intl(tmp_path, spanish_verses):
    ref = write_lines(tmp_path / "ref.es", spanish_verses)
    hyp = write_lines(tmp_path / "hyp.es", degraded(spanish_verses))
    result = run_score("--hyp", str(hyp), "--ref", str(ref), "--lang", "es", "--json", str(tmp_path / "scores.json"))
    assert result.returncode == 0, result.stderr
    ours = json.loads((tmp_path / "scores.json").read_text())["sacrebleu"]
    for tokenizer in ("13a", "intl"):
        cli = subprocess.run(
            [str(SACREBLEU), str(ref), "-i", str(hyp), "-tok", tokenizer, "--format", "json", "-w", "6"],
            capture_output=True,
            text=True,
        )
        assert cli.returncode == 0, cli.stderr
        expected = json.loads(cli.stdout)
        assert ours[tokenizer]["score"] == pytest.approx(expected["score"], abs=5e-6)
        assert ours[tokenizer]["signature"] == expected["signature"]
        assert f"tok:{tokenizer}" in result.stdout and expected["signature"] in result.stdout
    assert 20 < ours["13a"]["score"] < 90


def test_compound_split_matches_the_perl_substitution_including_its_overlap_rule():
    # s{(\S)-(\S)}{$1 ##AT##-##AT## $2}g does not rescan consumed characters: "a-b-c" keeps "b-c".
    assert compound_split("mother-in-law") == "mother ##AT##-##AT## in ##AT##-##AT## law"
    assert compound_split("a-b-c") == "a ##AT##-##AT## b-c"
    assert compound_split("- a -b c- e--f") == "- a -b c- e ##AT##-##AT## -f"
    assert compound_split("Haus @-@ Boot") == "Haus ##AT##-##AT## Boot"
    assert compound_split("Haus ##AT##-##AT## Boot") == "Haus ##AT##-##AT## Boot"


def test_tokenised_bleu_equals_hand_computed_value_after_compound_splitting():
    # hyp: Die Wasser ##AT##-##AT## Wirtschaft wächst schnell .   (7 tokens)
    # ref: Die Wasser ##AT##-##AT## Wirtschaft wächst .           (6 tokens)
    # p1 = 6/7, p2 = 4/6, p3 = 3/5, p4 = 2/4, BP = 1  →  BLEU = (6/35)^(1/4).
    hyp, ref = ["Die Wasser-Wirtschaft wächst schnell ."], ["Die Wasser-Wirtschaft wächst ."]
    result = tokenised_bleu(hyp, ref)
    assert result.score == pytest.approx(100 * (6 / 35) ** 0.25, abs=1e-9)
    assert [round(p, 6) for p in result.precisions] == [round(100 * x, 6) for x in (6 / 7, 4 / 6, 3 / 5, 2 / 4)]
    # score() Moses-tokenises detokenised text first (the hyphen stays inside the word), same result.
    assert score(hyp, ref, "de").tokenised.score == pytest.approx(100 * (6 / 35) ** 0.25, abs=1e-9)
    # A compound that cannot be split is one token: no 4-gram matches, unsmoothed BLEU is 0.
    assert math.isclose(
        tokenised_bleu(["Die WasserWirtschaft wächst schnell ."], ["Die WasserWirtschaft wächst ."]).score, 0.0
    )


def test_moses_tokenised_hypothesis_equal_to_the_reference_scores_100_everywhere():
    # What prepare scripts produce: XML escapes and aggressive "@-@" dash splits.
    reference = '¿Quién es el hijo de Dios? Él dijo: "la casa-grande" & más.'
    hypothesis = "¿ Quién es el hijo de Dios ? Él dijo : &quot; la casa @-@ grande &quot; &amp; más ."
    report = score([hypothesis], [reference], "es", hypotheses_tokenised=True)
    assert report.tokenised.score == pytest.approx(100.0)
    assert report.detokenised["13a"].score == pytest.approx(100.0)
    assert report.detokenised["intl"].score == pytest.approx(100.0)


def test_fairseq_output_in_any_order_scores_like_the_sorted_plain_file(tmp_path, spanish_verses):
    refs = spanish_verses[:20]
    hyps = degraded(refs)
    order = sorted(range(20), key=lambda i: (i * 7) % 20)
    generate = [f"S-{i}\tsource {i}\nT-{i}\t{refs[i]}\nH-{i}\t-0.5\t{hyps[i]}\nD-{i}\t-0.5\t{hyps[i]}" for i in order]
    gen = write_lines(tmp_path / "generate.txt", ["Generate test with beam=4", *generate])
    ref = write_lines(tmp_path / "ref.es", refs)
    plain = write_lines(tmp_path / "hyp.es", hyps)
    from_fairseq = score_spanish(gen, ref, "--hyp-format", "fairseq", "--json", str(tmp_path / "a.json"))
    from_plain = score_spanish(plain, ref, "--json", str(tmp_path / "b.json"))
    assert from_fairseq.returncode == 0 and from_plain.returncode == 0, from_fairseq.stderr
    assert json.loads((tmp_path / "a.json").read_text()) == json.loads((tmp_path / "b.json").read_text())


def test_fairseq_output_missing_sentences_is_an_error_naming_their_ids(tmp_path):
    lines = [f"H-{i}\t-0.1\tfrase {i}" for i in range(10) if i not in (3, 7)]
    gen = write_lines(tmp_path / "generate.txt", lines)
    ref = write_lines(tmp_path / "ref.es", [f"frase {i}" for i in range(10)])
    result = score_spanish(gen, ref, "--hyp-format", "fairseq", "--json", str(tmp_path / "out.json"))
    assert result.returncode == 2
    assert "2 of 10 sentences, ids 3, 7" in result.stderr
    assert not (tmp_path / "out.json").exists()
    with pytest.raises(BleuInputError, match="ids 3, 7"):
        read_fairseq_hypotheses(gen, 10)


@pytest.mark.parametrize(
    "case, message",
    [
        ("line_counts", "has 2 lines but reference file"),
        ("empty_line", "1 empty line(s), first at line 2"),
        ("not_utf8", "hyp.es:2: byte 16: byte 0xE9 is not UTF-8"),
        ("missing_file", "does not exist"),
    ],
)
def test_bad_input_exits_2_with_a_clear_message_and_writes_no_output(tmp_path, case, message):
    ref = write_lines(tmp_path / "ref.es", ["uno dos", "tres cuatro", "cinco"])
    hyp = tmp_path / "hyp.es"
    if case == "line_counts":
        write_lines(hyp, ["uno dos", "tres"])
    elif case == "empty_line":
        write_lines(hyp, ["uno dos", "", "cinco"])
    elif case == "not_utf8":
        hyp.write_bytes("uno dos\ntres caf".encode() + b"\xe9\ncinco\n")
    result = run_score(
        "--hyp", str(hyp), "--ref", str(ref), "--lang", "es", "--json", str(tmp_path / "out" / "scores.json")
    )
    assert result.returncode == 2
    assert message in result.stderr and str(hyp) in result.stderr
    assert result.stdout == ""
    assert not (tmp_path / "out").exists()
