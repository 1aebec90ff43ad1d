"""Text still in subword units, in every input of every scorer (ode_seq.metrics.subword_marks).

A hypothesis, reference, original or M2 file in SentencePiece pieces (``▁``) or subword-nmt units
(``@@``) is refused naming the file, how many of its lines hold the mark and the option that decodes
it, with the scorer's bad-input exit status and nothing written; ``--allow-subword-marks`` scores
it as it is. Real text (the bundled Bible in English and Spanish, e-mail addresses, a diff's
``@@``) is never refused. The pieces and units come from a SentencePiece model and subword-nmt
codes trained here, as a user's would.
"""

from __future__ import annotations

import gzip
import re
from typing import Callable, Dict

import pytest

from ode_seq.metrics import bleu, errant_score, m2, rouge
from ode_seq.metrics.subword_marks import check_words, find_marks
from tests.e2e.cli import run_pipeline
from tests.metrics.cli import CORPUS, SCORE_SH
from tests.metrics.test_text_inputs import (  # noqa: F401  (errant_annotator: the fixture one_errant_annotator uses)
    ROLES,
    TOOLS,
    errant_annotator,
    one_errant_annotator,
    run_tool,
)
from tests.reliability.mismatch_data import (
    learn_subword_nmt,
    sentencepiece_encoder,
    subword_nmt_encoder,
    train_sentencepiece,
)

BAD_INPUT_STATUS = {"bleu": 2, "rouge": 2, "m2": 1, "errant": 1}
DECODING_OPTION = {"sentencepiece": "--post-process sentencepiece", "subword-nmt": "--remove-bpe"}
MARK = {"sentencepiece": "'▁'", "subword-nmt": "a token ending in '@@'"}
Encoder = Callable[[str], str]


@pytest.fixture(scope="module")
def encoders(tmp_path_factory) -> Dict[str, Encoder]:
    """A SentencePiece model and subword-nmt codes learnt on the scorers' test inputs (their letters:
    the 30 pieces of train_sentencepiece hold them)."""
    directory = tmp_path_factory.mktemp("subwords")
    text = directory / "text.txt"
    inputs = b"".join(files[role] for files, _ in TOOLS.values() for role in files if not role.endswith(".m2"))
    text.write_text(re.sub("[^a-z \n]", "", inputs.decode()))
    return {
        "sentencepiece": sentencepiece_encoder(train_sentencepiece(text, directory / "spm")),
        "subword-nmt": subword_nmt_encoder(learn_subword_nmt(text, directory / "codes")),
    }


def encoded(data: bytes, encode: Encoder, m2: bool) -> tuple[bytes, int, int]:
    """(``data`` with its sentences encoded, marked sentences, sentences): an M2 file's S lines, or every line."""
    lines = data.decode().splitlines()
    sentences = [line for line in lines if line.startswith("S ")] if m2 else lines
    out = [("S " + encode(line[2:]) if m2 else encode(line)) if line in sentences else line for line in lines]
    marked = sum("▁" in encode(s[2:] if m2 else s) or "@@" in encode(s[2:] if m2 else s) for s in sentences)
    return "".join(line + "\n" for line in out).encode(), marked, len(sentences)


@pytest.mark.usefixtures("one_errant_annotator")
@pytest.mark.parametrize("subwords", ["sentencepiece", "subword-nmt"])
@pytest.mark.parametrize("tool, role", ROLES)
def test_every_scorer_refuses_text_in_subword_units_naming_file_evidence_and_fix(
    tool, role, subwords, encoders, tmp_path, capsys
):
    m2 = role.endswith(".m2")
    data, marked, sentences = encoded(TOOLS[tool][0][role], encoders[subwords], m2)
    status, out, err = run_tool(tool, tmp_path, capsys, role, data)
    assert status == BAD_INPUT_STATUS[tool], err
    unit = "sentences" if m2 else "lines"
    assert f"{tmp_path / role}{' (its S lines)' if m2 else ''} still holds subword units, not words: " in err
    assert f"{marked} of {sentences} {unit} hold {MARK[subwords]}" in err
    assert DECODING_OPTION[subwords] in err and "Or pass --allow-subword-marks to score it as it is" in err
    assert out == "" and not (tmp_path / "out").exists()


SCORERS = {"bleu": bleu, "rouge": rouge, "m2": m2, "errant": errant_score}
SCORE_LINE = {"bleu": "sacreBLEU 13a:", "rouge": "ROUGE-1", "m2": "Precision   :", "errant": "Prec"}


@pytest.mark.usefixtures("one_errant_annotator")
@pytest.mark.parametrize("tool", TOOLS)
def test_allow_subword_marks_scores_the_pieces_as_they_are(tool, encoders, tmp_path, capsys, monkeypatch):
    scorer = SCORERS[tool]
    main = scorer.main
    monkeypatch.setattr(scorer, "main", lambda argv, *rest: main([*argv, "--allow-subword-marks"], *rest))
    data, _, _ = encoded(TOOLS[tool][0]["hyp"], encoders["sentencepiece"], m2=False)
    status, out, err = run_tool(tool, tmp_path, capsys, "hyp", data)
    assert status == 0, err
    assert SCORE_LINE[tool] in out


@pytest.fixture(scope="module")
def bible() -> list[str]:
    """Every verse of the bundled Bible corpus, in English and in Spanish (alternately): real text."""
    lines = []
    for split in ("train", "valid", "test"):
        with gzip.open(CORPUS / f"{split}.tsv.gz", "rt", encoding="utf-8") as f:
            lines += [column for line in list(f)[1:] for column in line.rstrip("\n").split("\t")[1:]]
    return lines


def test_score_sh_refuses_fairseq_generate_output_still_in_pieces(encoders, bible, tmp_path):
    """The issue's case: fairseq-generate without --post-process sentencepiece, scored by score.sh."""
    references = bible[1::2][-40:]  # Spanish
    pieces = [encoders["sentencepiece"](line) for line in references]
    generated = tmp_path / "generate-test.txt"
    generated.write_text("".join(f"S-{i}\tx\nH-{i}\t-0.5\t{h}\nD-{i}\t-0.5\t{h}\n" for i, h in enumerate(pieces)))
    (tmp_path / "ref.es").write_text("".join(line + "\n" for line in references))
    result = run_pipeline(
        SCORE_SH, "--hyp", str(generated), "--hyp-format", "fairseq", "--hyp-tokenized", "--ref",
        str(tmp_path / "ref.es"), "--lang", "es", "--json", str(tmp_path / "scores.json"),
    )  # fmt: skip
    assert result.returncode == 2 and result.stdout == ""
    assert (
        f"error: fairseq-generate output {generated} still holds subword units, not words: 40 of 40 sentences "
        f"hold '▁' (SentencePiece's word-boundary mark); the first is sentence 0: {pieces[0][:60] + '…'!r}"
    ) in result.stderr
    assert "--post-process sentencepiece" in result.stderr and not (tmp_path / "scores.json").exists()


def test_a_paired_baseline_in_subword_units_is_refused(encoders, tmp_path, capsys):
    files = TOOLS["bleu"][0]
    for role, data in files.items():
        (tmp_path / role).write_bytes(data)
    baseline, marked, lines = encoded(files["hyp"], encoders["subword-nmt"], m2=False)
    (tmp_path / "baseline").write_bytes(baseline)
    status = bleu.main(["--hyp", str(tmp_path / "hyp"), "--ref", str(tmp_path / "ref"), "--lang", "en",
                        "--paired", str(tmp_path / "baseline")])  # fmt: skip
    err = capsys.readouterr().err
    assert status == 2
    assert f"baseline hypothesis file {tmp_path / 'baseline'} still holds subword units, not words: " in err
    assert f"{marked} of {lines} lines hold a token ending in '@@'" in err


# Real text that holds '@' or a block character, and the mark-like tokens of other tools.
REAL_TEXT = [
    "Write to maria.lopez@example.com or @maria_l before Monday .",
    "cc : j.smith@uni.ac.uk , help@@example.org is a typo for help@example.org",
    "@@ -1,3 +1,4 @@ def main ( ) :",  # a unified diff's hunk header
    "a well @-@ known , fast @-@ growing town",  # Moses' aggressive hyphen splitting
    "the Rhein ##AT##-##AT## Main area",  # compound splitting for tokenised BLEU
]


def test_real_text_is_never_refused(bible, tmp_path, capsys):
    assert len(bible) == 2 * (28_777 + 1_018 + 1_008)
    assert find_marks(bible + REAL_TEXT).marked == []
    text = tmp_path / "text.txt"
    text.write_text("".join(line + "\n" for line in REAL_TEXT))
    assert bleu.main(["--hyp", str(text), "--ref", str(text), "--lang", "en"]) == 0
    assert "BLEU = 100.00" in capsys.readouterr().out


@pytest.mark.parametrize(
    "marked, lines, refused",
    [(0, 10, False), (1, 3, True), (1, 100, True), (1, 101, False), (2, 200, True), (2, 201, False)],
)
def test_a_file_is_refused_when_at_least_one_percent_of_its_lines_hold_a_mark(marked, lines, refused):
    text = ["sales by month : ▁▂▃▅▇"] * marked + ["sales by month : rising"] * (lines - marked)
    if not refused:
        check_words(text, "report.txt")
        return
    with pytest.raises(ValueError, match=f"report.txt still holds subword units, not words: {marked} of {lines} lines"):
        check_words(text, "report.txt")
