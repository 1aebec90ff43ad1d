"""The translation recipe end to end through its real scripts, on a slice of the Bible corpus.

run_bible_demo.sh: prepare (Moses + SentencePiece + fairseq-preprocess) → train a tiny model for a
few updates → average the saved checkpoints → beam search → BLEU. The architecture is
ODE_SEQ_TEST_ARCH, or ode_transformer_rk4_small when user_dir registers it, else fairseq's
transformer; tiny sizes are passed on the command line either way.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tests.e2e import cli
from tests.e2e.corpus import BIBLE_SLICE

REPO_ROOT = Path(__file__).resolve().parents[2]
TRANSLATION = REPO_ROOT / "examples" / "translation"
TEST_PAIRS = 16
TINY_MODEL = [*cli.TINY_MODEL, "--max-tokens", "600"]


def pipeline_arch() -> str:
    if os.environ.get("ODE_SEQ_TEST_ARCH"):
        return os.environ["ODE_SEQ_TEST_ARCH"]
    sys.path.insert(0, str(REPO_ROOT))
    from fairseq.models import ARCH_MODEL_REGISTRY

    import user_dir  # noqa: F401  (registers the ODE architectures)

    small_rk4 = "ode_transformer_rk4_small"
    return small_rk4 if small_rk4 in ARCH_MODEL_REGISTRY else "transformer"


ARCH = pipeline_arch()
PREPARE_ARGS = BIBLE_SLICE
DEMO_ARGS = [
    "--arch",
    ARCH,
    *PREPARE_ARGS,
    "--max-update",
    "6",
    "--save-interval-updates",
    "2",
    "--max-len-a",
    "0",
    "--max-len-b",
    "6",
    "--",
    *TINY_MODEL,
]


def run_script(script: str, *args: str) -> subprocess.CompletedProcess:
    return cli.run_pipeline(TRANSLATION / script, *args, timeout=600)


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess, Path]:
    work = tmp_path_factory.mktemp("bible-demo")
    result = run_script("run_bible_demo.sh", "--work-dir", str(work), "--keep-checkpoints", *DEMO_ARGS)
    assert result.returncode == 0, result.stderr[-4000:]
    kept = tmp_path_factory.mktemp("kept-checkpoints")
    for checkpoint in (work / "checkpoints" / ARCH).glob("checkpoint_*_*.pt"):
        shutil.copy(checkpoint, kept)
    return work, result, kept


def summary(stdout: str) -> str:
    return stdout.split(f"test set ({TEST_PAIRS} verses), beam 4, lenpen 0.6:")[1]


def test_demo_ends_with_tokenised_bleu_and_sacrebleu_scores_with_signatures(demo):
    work, result, _ = demo
    summary_text = summary(result.stdout)
    assert f"== {ARCH}" in summary_text
    assert "tokenised, compound split: BLEU = " in summary_text
    for tokenizer in ("13a", "intl"):
        assert f"signature: nrefs:1|case:mixed|eff:no|tok:{tokenizer}|smooth:exp|version:" in summary_text
    scores = json.loads((work / "checkpoints" / ARCH / "eval-test" / "scores.json").read_text())
    assert 0 <= scores["tokenised_compound_split"]["score"] <= 100
    assert set(scores["sacrebleu"]) == {"13a", "intl"}


def test_training_stops_at_the_update_budget_with_one_checkpoint_every_two_updates(demo):
    work, _, kept = demo
    save_dir = work / "checkpoints" / ARCH
    assert sorted(p.name for p in kept.glob("checkpoint_*_*.pt")) == [
        "checkpoint_1_2.pt",
        "checkpoint_1_4.pt",
        "checkpoint_1_6.pt",
    ]
    updates = re.findall(r"num_updates[ =](\d+)", (save_dir / "train.log").read_text())
    assert max(map(int, updates)) == 6
    data_bin = work / "data-bin"
    assert (data_bin / "dict.en.txt").read_text() == (data_bin / "dict.es.txt").read_text()


def test_evaluated_model_is_the_parameter_mean_of_the_saved_checkpoints(demo):
    from ode_seq.checkpoint_files import load_checkpoint

    save_dir = demo[0] / "checkpoints" / ARCH
    states = [load_checkpoint(str(demo[2] / f"checkpoint_1_{u}.pt"))["model"] for u in (2, 4, 6)]
    averaged = load_checkpoint(str(save_dir / "eval-test" / "averaged.pt"))["model"]
    assert averaged.keys() == states[0].keys()
    for name, value in averaged.items():
        if value.is_floating_point():  # the float64 sum of three float32 values is exact: one rounding, of the mean
            assert torch.equal(value, (sum(s[name].double() for s in states) / 3).to(value.dtype)), name


def test_every_test_sentence_is_translated_exactly_once(demo):
    generated = (demo[0] / "checkpoints" / ARCH / "eval-test" / "generate-test.txt").read_text()
    ids = sorted(int(line.split("\t")[0][2:]) for line in generated.splitlines() if line.startswith("H-"))
    assert ids == list(range(TEST_PAIRS))
    references = (demo[0] / "raw" / "test.es").read_text(encoding="utf-8").splitlines()
    assert len(references) == TEST_PAIRS


def test_progress_lines_count_updates_and_estimate_the_time_left(demo):
    stderr = demo[1].stderr
    assert re.search(r"^update 1/6 \(17%\) \| loss [0-9.]+", stderr, re.M)
    for update in range(2, 7):  # the speed is measured from the second progress line on
        assert re.search(
            rf"^update {update}/6 \({round(100 * update / 6)}%\) \| loss [0-9.]+ \| "
            r"[0-9.]+ updates/s \| ~[0-9]+ s left$",
            stderr,
            re.M,
        ), update
    assert "validation after 6 updates: loss" in stderr


def test_demo_output_holds_no_library_warnings_or_model_dump(demo):
    output = demo[1].stdout + demo[1].stderr
    for noise in ("Warning", "tensorboardX", "hydra", "ODETransformerEncoder(", "| INFO |"):
        assert noise not in output, noise


def test_demo_shows_three_test_translations_next_to_their_references(demo):
    shown = demo[1].stdout.split("Test verses translated by")[1].split("Translate your own")[0]
    assert shown.count("  source:") == shown.count("  reference:") == shown.count("  translation:") == 3
    sources = (demo[0] / "raw" / "test.en").read_text(encoding="utf-8").splitlines()
    for line in re.findall(r"^  source:\s+(.*)$", shown, re.M):
        assert line in sources


def test_printed_commands_translate_your_own_sentence(demo):
    commands = demo[1].stdout.split("Translate your own sentences")[1].splitlines()[1:3]
    assert "fairseq-interactive" in commands[0] and "from_pretrained" in commands[1]
    env = dict(
        os.environ,
        PYTHONWARNINGS="ignore",
        OMP_NUM_THREADS="1",
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
    )
    for command in commands:
        result = subprocess.run(
            ["bash", "-c", f"set -o pipefail; {command.strip()}"],
            capture_output=True,
            text=True,
            env=env,
            cwd="/",
            timeout=300,
        )
        assert result.returncode == 0, (command, result.stderr[-3000:])
        (translation,) = result.stdout.strip().splitlines()
        assert translation.strip(), command


def test_rerun_skips_every_finished_stage_keeps_the_scores_and_then_only_the_model(demo):
    work, first, _ = demo
    again = run_script("run_bible_demo.sh", "--work-dir", str(work), *DEMO_ARGS)
    assert again.returncode == 0, again.stderr[-4000:]
    prepare_log = (work / "prepare.log").read_text()  # the demo keeps the preparation's messages there
    for stage in ("corpus extraction", "tokenisation", "SentencePiece training", "binarisation"):
        assert f"skip {stage}" in prepare_log, stage
    for stage in (f"training {ARCH}", "checkpoint averaging", "generation", "scoring"):
        assert f"skip {stage}" in again.stderr, stage
    assert summary(again.stdout) == summary(first.stdout)
    save_dir = work / "checkpoints" / ARCH
    assert not list(save_dir.glob("checkpoint*.pt"))
    assert (save_dir / "eval-test" / "averaged.pt").is_file()


def test_a_work_dir_refuses_other_settings(demo):
    result = run_script("prepare_bible.sh", "--work-dir", str(demo[0]), "--train-pairs", "300")
    assert result.returncode != 0
    assert "was prepared with other settings" in result.stderr


def test_evaluation_refuses_to_reuse_translations_made_with_another_beam(demo):
    work = demo[0]
    eval_dir = work / "checkpoints" / ARCH / "eval-test"
    scores = (eval_dir / "scores.txt").read_bytes()
    result = run_script(
        "evaluate.sh",
        "--data-bin",
        str(work / "data-bin"),
        "--checkpoint-dir",
        str(work / "checkpoints" / ARCH),
        "--ref",
        str(work / "raw" / "test.es"),
        "--lang",
        "es",
        "--beam",
        "1",
    )
    assert result.returncode != 0
    assert f"{eval_dir} was prepared with other settings" in result.stderr
    assert (eval_dir / "scores.txt").read_bytes() == scores


def test_a_moved_work_dir_resumes_and_a_changed_corpus_is_refused(demo, tmp_path):
    work, first, _ = demo
    moved, corpus = tmp_path / "moved", tmp_path / "corpus"
    shutil.copytree(work, moved)
    shutil.copytree(TRANSLATION / "data", corpus)
    prepared = run_script("prepare_bible.sh", "--work-dir", str(moved), "--corpus-dir", str(corpus), *PREPARE_ARGS)
    assert prepared.returncode == 0, prepared.stderr[-4000:]
    assert "skip binarisation" in prepared.stderr
    again = run_script("run_bible_demo.sh", "--work-dir", str(moved), *DEMO_ARGS)
    assert again.returncode == 0, again.stderr[-4000:]
    for stage in ("checkpoint averaging", "generation", "scoring"):
        assert f"skip {stage}" in again.stderr, stage
    assert summary(again.stdout).replace(str(moved), str(work)) == summary(first.stdout)

    with gzip.open(corpus / "test.tsv.gz", "at", encoding="utf-8") as test_split:
        test_split.write("Gen 99:1\tOne more verse.\tUn versículo más.\n")
    changed = run_script("prepare_bible.sh", "--work-dir", str(moved), "--corpus-dir", str(corpus), *PREPARE_ARGS)
    assert changed.returncode == 1
    assert f"{moved / 'corpus'} was prepared with other settings" in changed.stderr


def test_a_work_dir_named_by_a_relative_path_is_the_same_work_dir(demo):
    relative = os.path.relpath(demo[0], REPO_ROOT)
    result = run_script("prepare_bible.sh", "--work-dir", relative, *PREPARE_ARGS)
    assert result.returncode == 0, result.stderr[-4000:]
    assert "skip binarisation" in result.stderr


def write_pair(prefix: Path, src_lines, tgt_lines) -> None:
    for lang, lines in (("en", src_lines), ("es", tgt_lines)):
        data = lines if isinstance(lines, bytes) else "".join(f"{line}\n" for line in lines).encode()
        Path(f"{prefix}.{lang}").write_bytes(data)


@pytest.mark.parametrize(
    "case, message",
    [
        ("line_counts", "train.es ends at line 2 but"),
        ("empty_line", "valid.es line 2 is empty"),
        ("not_utf8", "test.en:2: byte 21: byte 0xE9 is not UTF-8"),
        ("missing_file", "test.es does not exist"),
        ("missing_codes", "BPE codes file"),
    ],
)
def test_prepare_rejects_bad_input_with_a_clear_error_and_no_outputs(tmp_path, case, message):
    good = ["In the beginning.", "God said."], ["En el principio.", "Dijo Dios."]
    write_pair(tmp_path / "train", *good)
    write_pair(tmp_path / "valid", *good)
    write_pair(tmp_path / "test", *good)
    extra = []
    if case == "line_counts":
        write_pair(tmp_path / "train", good[0] + ["Light."], good[1])
    elif case == "empty_line":
        write_pair(tmp_path / "valid", good[0], [good[1][0], ""])
    elif case == "not_utf8":
        write_pair(tmp_path / "test", b"In the beginning.\ncaf\xe9\n", good[1])
    elif case == "missing_file":
        (tmp_path / "test.es").unlink()
    elif case == "missing_codes":
        extra = ["--bpe-codes", str(tmp_path / "missing.codes")]
    work = tmp_path / "work"
    result = run_script(
        "prepare_parallel.sh",
        "--train",
        str(tmp_path / "train"),
        "--valid",
        str(tmp_path / "valid"),
        "--test",
        str(tmp_path / "test"),
        "--src",
        "en",
        "--tgt",
        "es",
        "--work-dir",
        str(work),
        "--workers",
        "1",
        *extra,
    )
    assert result.returncode != 0
    assert message in result.stderr
    leftovers = sorted(p.name for p in work.iterdir() if p.name != ".pipeline.lock") if work.exists() else []
    assert leftovers in ([], ["run-config.txt"])  # the lock (examples/lib.sh, lock_dir) is no output
