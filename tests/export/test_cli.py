"""``python -m ode_seq.cli.export``: usage errors exit 2, models a target cannot hold exit 1 naming
the option, and neither leaves output behind."""

import re
from pathlib import Path

import pytest

from ode_seq.cli.export import main, parse_args, text_processing
from ode_seq.export.hf_folder import TextProcessing
from tests.e2e.cli import ROOT

FIXTURES = Path(ROOT) / "tests" / "fixtures"


def _export(tmp_path, checkpoint, *extra):
    return main(["--path", str(FIXTURES / "checkpoints" / checkpoint), "--data", str(FIXTURES), *extra])


@pytest.mark.parametrize(
    "checkpoint, target, refusal",
    [
        ("rk2_learned.pt", "ctranslate2", r"heun \(--encoder-ode-method\)"),
        ("rk2_relative.pt", "ctranslate2", r"--encoder-relative-positions"),
        ("rk2_dlcl.pt", "fairseq", r"--encoder-layer-history"),
        ("euler.pt", "hf", r"--share-all-embeddings"),
        ("stable.pt", "hf", r"stable layers"),
    ],
)
def test_a_model_the_target_cannot_hold_exits_1_naming_the_option(tmp_path, capsys, checkpoint, target, refusal):
    output = tmp_path / ("plain.pt" if target == "fairseq" else "out")
    assert _export(tmp_path, checkpoint, "--to", target, "--output", str(output)) == 1
    error = capsys.readouterr().err
    assert error.startswith("export: error:") and re.search(refusal, error), error
    assert list(tmp_path.iterdir()) == []


def test_an_euler_checkpoint_exports_to_fairseq_and_ctranslate2(tmp_path, capsys):
    assert _export(tmp_path, "euler.pt", "--output", str(tmp_path / "plain.pt")) == 0
    assert _export(tmp_path, "euler.pt", "--to", "ctranslate2", "--output", str(tmp_path / "ct2")) == 0
    assert (tmp_path / "ct2" / "model.bin").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ct2", "plain.pt"]  # no work files left


def test_a_non_empty_output_directory_is_refused_before_any_work(tmp_path, capsys):
    (tmp_path / "ct2").mkdir()
    (tmp_path / "ct2" / "mine.txt").write_text("keep")
    assert _export(tmp_path, "euler.pt", "--to", "ctranslate2", "--output", str(tmp_path / "ct2")) == 2
    assert "exists and is not empty; name a new directory" in capsys.readouterr().err
    assert [p.name for p in (tmp_path / "ct2").iterdir()] == ["mine.txt"]


def test_a_data_directory_without_dictionaries_is_refused_naming_data(tmp_path, capsys):
    code = main(
        [
            "--path",
            str(FIXTURES / "checkpoints" / "euler.pt"),
            "--data",
            str(tmp_path),
            "--output",
            str(tmp_path / "plain.pt"),
        ]
    )
    assert code == 2
    assert "holds no dictionary (dict.*.txt): pass --data" in capsys.readouterr().err
    assert not (tmp_path / "plain.pt").exists()


@pytest.mark.parametrize(
    "extra, usage",
    [
        (["--to", "onnx"], r"invalid choice: 'onnx'"),
        (["--spm", "spm.model"], r"--spm is for --to hf"),
        (["--to", "ctranslate2", "--tokenizer", "moses"], r"--tokenizer is for --to hf"),
        (["--to", "hf", "--tokenizer", "spacy"], r"invalid choice: 'spacy'"),
        (["--to", "hf", "--moses-no-escape"], r"--moses-no-escape is an option of --tokenizer moses"),
        (["--decoder-steps", "0"], r"--decoder-steps must be a positive number"),
    ],
)
def test_usage_errors_exit_2(tmp_path, capsys, extra, usage):
    with pytest.raises(SystemExit) as exit_:
        _export(tmp_path, "euler.pt", "--output", str(tmp_path / "plain.pt"), *extra)
    assert exit_.value.code == 2
    assert re.search(usage, capsys.readouterr().err)


def test_moses_settings_take_the_translation_tasks_languages():
    """As fairseq-interactive's ``--tokenizer moses``: Moses of the source language on the input,
    of the target language on the output."""
    from fairseq.tasks.translation import TranslationConfig, TranslationTask

    task = TranslationTask.setup_task(TranslationConfig(data=str(FIXTURES), source_lang="src", target_lang="tgt"))
    args = parse_args(["--to", "hf", "--tokenizer", "moses", "--path", "ckpt.pt", "--output", "hf"])
    assert text_processing(args, task) == TextProcessing("moses", source_lang="src", target_lang="tgt")
    args = parse_args(["--to", "hf", "--tokenizer", "moses", "--moses-no-dash-splits", "--path", "c", "--output", "h"])
    assert text_processing(args, task) == TextProcessing("moses", "src", "tgt", moses_no_dash_splits=True)
