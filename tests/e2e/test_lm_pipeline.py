"""The language-modeling pipeline end to end through its real scripts on a slice of the Bible's
English column (demo.sh: prepare → train → evaluate → sample, with the residual transformer_lm
beside the ODE model), its resumption, the WikiText-103 preparation on a tiny file in WikiText's
format, and the text helpers (lm_text.py)."""

from __future__ import annotations

import gzip
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import List

import pytest

from tests.e2e.cli import run_pipeline
from tests.reliability.process_tree import Run, file_states

REPO_ROOT = Path(__file__).resolve().parents[2]
PIPELINE = REPO_ROOT / "examples" / "language_modeling"
BIBLE = REPO_ROOT / "examples" / "translation" / "data"
sys.path.insert(0, str(PIPELINE))
import lm_text  # noqa: E402  (the pipeline's helper, a script beside the shell scripts)

ODE_ARCH = "ode_transformer_lm_rk2_learned"
LINES = {"train": 300, "valid": 20, "test": 20}
TINY_WIDTH = ["--decoder-embed-dim", "32", "--decoder-ffn-embed-dim", "64"]
TINY_WIDTH += ["--decoder-input-dim", "32", "--decoder-output-dim", "32"]
DEMO_ARGS = [
    *(arg for split, n in LINES.items() for arg in (f"--{split}-lines", str(n))),
    "--workers",
    "1",
    "--max-update",
    "6",
    "--warmup",
    "2",
    "--compare",
    "--gpus",
    "0",
    "--",
    *TINY_WIDTH,
]


def run_script(script: str, *args: str) -> subprocess.CompletedProcess:
    return run_pipeline(PIPELINE / script, *args)


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess]:
    work = tmp_path_factory.mktemp("lm-demo")
    result = run_script("demo.sh", "--work-dir", str(work), *DEMO_ARGS)
    assert result.returncode == 0, result.stderr[-4000:]
    return work, result


def test_prepare_takes_the_english_column_of_each_split_moses_tokenised(demo):
    work = demo[0]
    for split, n in LINES.items():
        with gzip.open(BIBLE / f"{split}.tsv.gz", "rt", encoding="utf-8") as f:
            rows = [line.rstrip("\n").split("\t") for line in f.readlines()[1 : n + 1]]
        assert (work / "raw" / f"{split}.txt").read_text(encoding="utf-8").splitlines() == [en for _, en, _ in rows]
        assert (work / "raw" / f"{split}.ref").read_text().splitlines() == [ref for ref, _, _ in rows]
        assert len((work / "tok" / f"{split}.txt").read_text(encoding="utf-8").splitlines()) == n
    first = (work / "tok" / "train.txt").read_text(encoding="utf-8").splitlines()[0]
    assert first == "In the beginning , God created the heavens and the earth ."


def chapters(work: Path, split: str) -> set:
    return {ref.rsplit(":", 1)[0] for ref in (work / "raw" / f"{split}.ref").read_text().splitlines()}


def test_no_chapter_of_the_valid_or_test_verses_is_in_training(demo):
    train = chapters(demo[0], "train")
    assert train and not train & (chapters(demo[0], "valid") | chapters(demo[0], "test"))


def test_the_dictionary_holds_the_training_words_seen_at_least_twice(demo):
    words = (demo[0] / "tok" / "train.txt").read_text(encoding="utf-8").split()
    counts = {w: words.count(w) for w in set(words)}
    dictionary = [line.split()[0] for line in (demo[0] / "data-bin" / "dict.txt").read_text().splitlines()]
    real = [w for w in dictionary if not w.startswith("madeupword")]  # fairseq pads the size to a multiple of 8
    assert sorted(real) == sorted(w for w, c in counts.items() if c >= 2)


def test_both_models_train_to_the_budget_and_are_scored_side_by_side(demo):
    work, result = demo
    summary = result.stdout.split("6 updates per model:")[1]
    for arch in (ODE_ARCH, "transformer_lm"):
        scores = rf"^== {arch}: test perplexity ([\d.]+) \(([\d.]+) bits per token over (\d+) tokens\)"
        (line,) = re.findall(scores, summary, re.M)
        perplexity, bits, tokens = float(line[0]), float(line[1]), int(line[2])
        assert perplexity == pytest.approx(2**bits, rel=1e-3)  # both rounded in the log
        test_tokens = (work / "tok" / "test.txt").read_text(encoding="utf-8").split()
        assert tokens == len(test_tokens) + LINES["test"]  # every word and every line end
        updates = re.findall(r"num_updates[ =](\d+)", (work / "checkpoints" / arch / "train.log").read_text())
        assert max(map(int, updates)) == 6


def test_the_residual_model_is_fairseqs_prenorm_transformer_lm_of_the_same_size(demo):
    from ode_seq.checkpoint_files import load_checkpoint

    shapes = {}
    for arch in (ODE_ARCH, "transformer_lm"):
        checkpoint = load_checkpoint(str(demo[0] / "checkpoints" / arch / "checkpoint_best.pt"))
        model = checkpoint["cfg"]["model"]  # transformer_lm's is a dict, an ODE LM's a Namespace
        assert (model if isinstance(model, dict) else vars(model))["decoder_normalize_before"]
        shapes[arch] = {k: v.shape for k, v in checkpoint["model"].items()}
    gates = {k for k in shapes[ODE_ARCH] if k not in shapes["transformer_lm"]}
    assert gates and all(".combiner." in k for k in gates), gates  # the learned stage weights
    assert {k: v for k, v in shapes[ODE_ARCH].items() if k not in gates} == shapes["transformer_lm"]


def test_both_models_train_with_the_demos_batches_dropout_and_schedule(demo):
    from ode_seq.checkpoint_files import load_checkpoint

    for arch in (ODE_ARCH, "transformer_lm"):
        cfg = load_checkpoint(str(demo[0] / "checkpoints" / arch / "checkpoint_best.pt"))["cfg"]
        model = cfg["model"] if isinstance(cfg["model"], dict) else vars(cfg["model"])
        assert (cfg["dataset"]["max_tokens"], model["dropout"]) == (2048, 0.0)  # demo.sh's defaults
        scheduler = cfg["lr_scheduler"]
        assert (scheduler["_name"], scheduler["warmup_updates"], scheduler["total_num_update"]) == (
            "polynomial_decay",
            2,  # --warmup 2, given
            6,
        )


def test_samples_continue_prompts_from_the_test_verses(demo):
    shown = demo[1].stdout.split("each line starts with its prompt):\n")[1].split("\n\n")[0].splitlines()
    assert len(shown) == 3
    verses = (demo[0] / "raw" / "test.txt").read_text(encoding="utf-8").splitlines()
    for sample, prompt in zip(shown, lm_text.prompts(verses, 3, 4)):
        assert sample.startswith("  " + prompt) and len(sample.split()) > 4  # the prompt as given, even its <unk>s


def test_the_printed_command_samples_your_own_prompt(demo):
    command = demo[1].stdout.split("Sample your own prompts: ")[1].splitlines()[0]
    env = dict(os.environ, PYTHONWARNINGS="ignore", OMP_NUM_THREADS="1")
    result = subprocess.run(["bash", "-c", command], capture_output=True, text=True, env=env, cwd="/", timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    (sample,) = result.stdout.splitlines()
    assert sample.startswith("In the beginning") and len(sample.split()) > 3


def test_rerun_skips_every_finished_stage_and_prints_the_same_results(demo):
    work, first = demo
    again = run_script("demo.sh", "--work-dir", str(work), *DEMO_ARGS)
    assert again.returncode == 0, again.stderr[-4000:]
    assert not re.search(r"^\[[\d:]+\] run ", again.stderr + (work / "prepare.log").read_text().split("skip")[-1], re.M)
    for stage in ("verse extraction", "Moses tokenisation", "binarisation"):
        assert f"skip {stage}" in (work / "prepare.log").read_text(), stage
    for stage in (f"training {ODE_ARCH}", "training transformer_lm", "fairseq-eval-lm", "scores", "sampling"):
        assert f"skip {stage}" in again.stderr, stage
    assert again.stdout == first.stdout


def test_a_rerun_with_another_recipe_is_refused_and_the_run_kept(demo):
    work = demo[0]
    checkpoint = work / "checkpoints" / ODE_ARCH / "checkpoint_last.pt"
    before = checkpoint.stat().st_mtime_ns
    (work / "checkpoints" / ODE_ARCH / "train.done").rename(work / "train.done.kept")
    try:
        result = run_script("train.sh", "--work-dir", str(work), "--max-update", "8", "--lr", "1e-3", "--gpus", "0")
    finally:
        (work / "train.done.kept").rename(work / "checkpoints" / ODE_ARCH / "train.done")
    assert result.returncode == 1
    assert "was prepared with other settings" in result.stderr
    assert checkpoint.stat().st_mtime_ns == before


def test_training_stopped_by_sigterm_leaves_no_process_and_no_finished_mark(demo, tmp_path):
    save = tmp_path / "checkpoints"
    args = ["--data-bin", str(demo[0] / "data-bin"), "--save-dir", str(save), "--gpus", "0", "--max-update", "300"]
    run = Run([str(PIPELINE / "train.sh"), *args, "--warmup", "2", "--", *TINY_WIDTH], tmp_path / "logs")
    run.wait_until(lambda: "/300 (" in run.log(), "training logged its first updates")
    assert run.running("fairseq-train") and run.running("train_progress.py")
    run.process.send_signal(signal.SIGTERM)
    assert run.finish(timeout=120) in (-signal.SIGTERM, 128 + signal.SIGTERM), run.log()[-3000:]
    assert run.commands() == [] and "train.sh: stopped by SIGTERM" in run.log()
    before = file_states(save)
    time.sleep(1)
    assert file_states(save) == before and not (save / "train.done").exists()


def test_a_subset_that_was_not_binarised_is_named_before_anything_is_written(demo, tmp_path):
    out = tmp_path / "eval"
    result = run_script(
        "evaluate.sh", "--work-dir", str(demo[0]), "--subset", "dev", "--out-dir", str(out), "--gpus", "0"
    )
    assert result.returncode == 1
    assert f"{demo[0] / 'data-bin'} holds no binarised subset 'dev'" in result.stderr
    assert not out.exists()


@pytest.mark.parametrize(
    "script, args, message",
    [
        ("train.sh", ["--max-epoch", "0"], "give a budget: --max-update N and/or --max-epoch N"),
        ("train.sh", ["--max-update", "100", "--schedule", "linear", "--warmup", "100"], "must exceed --warmup (100)"),
        ("train.sh", ["--adaptive", "2000;5000"], "--adaptive takes increasing word counts separated by commas"),
        ("evaluate.sh", ["--context-window", "128"], "--context-window (128) must be smaller than --tokens-per-sample"),
        ("prepare.sh", ["--corpus", "wikitext-103", "--train-lines", "5"], "take verses of the bible corpus only"),
    ],
)
def test_contradictory_options_are_usage_errors(script, args, message, tmp_path):
    result = run_script(script, "--work-dir", str(tmp_path / "work"), *args)
    assert result.returncode == 2 and message in result.stderr, result.stderr
    assert not (tmp_path / "work").exists()


def test_a_wiki103_architecture_trains_with_the_adaptive_loss_unasked(demo, tmp_path):
    save = tmp_path / "run"
    cutoffs = ["--adaptive-input-cutoff", "10,20", "--adaptive-softmax-cutoff", "10,20"]  # the vocabulary's size
    args = ["--data-bin", str(demo[0] / "data-bin"), "--save-dir", str(save), "--gpus", "0", "--max-update", "2"]
    result = run_script("train.sh", *args, "--arch", "ode_transformer_lm_euler_wiki103", "--", *TINY_WIDTH, *cutoffs)
    assert result.returncode == 0, result.stderr[-3000:]
    log = (save / "train.log").read_text()
    assert "'_name': 'adaptive_loss'" in log and "ddp_backend='legacy_ddp'" in log


@pytest.mark.parametrize("cutoffs", ["8,4", "4,100000"])
def test_adaptive_cutoffs_must_increase_within_the_vocabulary(cutoffs, demo, tmp_path):
    work, _ = demo
    vocabulary = len((work / "data-bin" / "dict.txt").read_text().splitlines()) + 4
    result = run_script("train.sh", "--work-dir", str(work), "--save-dir", str(tmp_path / "run"), "--adaptive", cutoffs)
    assert result.returncode == 2, result.stderr
    assert f"must increase and stay below the vocabulary's {vocabulary} words" in result.stderr
    assert not (tmp_path / "run").exists()


WIKITEXT = {
    "train": [
        "",
        " = Valkyria Chronicles III = ",
        "",
        " Senjō no Valkyria 3 : <unk> Chronicles is a tactical role @-@ playing video game . ",
        " It was released in January 2011 , with 1 @,@ 500 copies sold . ",
        "",
        " = = Gameplay = = ",
        "",
        " The game is a tactical role @-@ playing game . ",
    ],
    "valid": ["", " = Homarus gammarus = ", "", " Homarus gammarus is a large <unk> . "],
    "test": ["", " = Robert Boulter = ", "", " Robert Boulter is an English film and television actor . "],
}


def write_wikitext(directory: Path, splits=WIKITEXT) -> Path:
    directory.mkdir()
    for split, lines in splits.items():
        (directory / f"wiki.{split}.tokens").write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return directory


def prepare_wikitext(source: Path, work: Path) -> subprocess.CompletedProcess:
    return run_script("prepare.sh", "--corpus", "wikitext-103", "--wikitext-dir", str(source), "--work-dir", str(work))


def binarised_counts(log: str, split: str) -> List[int]:
    (counts,) = re.findall(rf"{split}\.tokens: (\d+) sents, (\d+) tokens", log)
    return [int(n) for n in counts]


def test_wikitext_is_binarised_as_it_is_with_its_whole_vocabulary(tmp_path):
    source = write_wikitext(tmp_path / "wikitext-103")
    work = tmp_path / "work"
    result = prepare_wikitext(source, work)
    assert result.returncode == 0, result.stderr[-3000:]
    log = (work / "preprocess.log").read_text()
    for split, lines in WIKITEXT.items():  # every word, and an end-of-line token per line (blank lines too)
        assert binarised_counts(log, split) == [len(lines), sum(len(line.split()) for line in lines) + len(lines)]
    words = [line.split()[0] for line in (work / "data-bin" / "dict.txt").read_text().splitlines()]
    train_words = {w for line in WIKITEXT["train"] for w in line.split()} - {"<unk>"}  # <unk> is fairseq's own symbol
    assert train_words <= set(words) and "<unk>" not in words and "@-@" in words
    again = prepare_wikitext(source, work)
    assert again.returncode == 0 and "skip binarisation" in again.stderr


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda s: {**s, "train": [line.replace("<unk>", "Ch") for line in s["train"]]}, "that is the raw version"),
        (lambda s: {**s, "valid": ["Homarus gammarus is a lobster ."]}, "does not start with a WikiText heading"),
        (lambda s: {k: v for k, v in s.items() if k != "test"}, "wiki.test.tokens is missing or empty"),
    ],
)
def test_what_is_not_wikitext_103_is_refused_naming_the_problem(change, message, tmp_path):
    source = write_wikitext(tmp_path / "wikitext-103", change(WIKITEXT))
    work = tmp_path / "work"
    result = prepare_wikitext(source, work)
    assert result.returncode == 1 and message in result.stderr, result.stderr
    assert not (work / "data-bin").exists()


def test_tokenisation_splits_punctuation_without_normalising_or_escaping():
    verse = "God’s Spirit said, “Let there be light & day—now.”"
    (tokens,) = lm_text.tokenize([verse + "\n"])
    assert tokens == "God ’ s Spirit said , “ Let there be light & day — now . ”"
    assert list(lm_text.tokenize([verse], workers=2)) == [tokens]
    (text,) = lm_text.detokenize([tokens])
    assert text.startswith("God’s Spirit said, “")


def test_samples_keep_their_prompts_as_given():
    samples = ["<unk> a ship of gopher wood", "In the beginning"]
    prompts = ["Make a ship of", "In the"]
    assert list(lm_text.with_prompts(samples, prompts)) == ["Make a ship of gopher wood", "In the beginning"]


def test_prompts_are_spread_over_the_lines_that_are_long_enough():
    lines = [f"w{i} a b c d" for i in range(10)] + ["short"]
    assert lm_text.prompts(lines, 3, 2) == ["w0 a", "w3 a", "w6 a"]
    with pytest.raises(ValueError, match="only 10 lines have more than 2 words"):
        lm_text.prompts(lines, 11, 2)


def test_the_perplexity_line_is_read_from_fairseqs_log():
    log = "INFO | Evaluated 29,931 tokens in 3.1s (9655.16 tokens/s)\nINFO | Loss (base 2): 5.3085, Perplexity: 39.64\n"
    assert lm_text.perplexity_line(log, 29931) == "perplexity 39.64 (5.3085 bits per token over 29931 tokens)"
    with pytest.raises(ValueError, match="no 'Evaluated N tokens'"):
        lm_text.perplexity_line("Loss (base 2): 5.3085, Perplexity: 39.64", 29931)


def test_a_perplexity_over_part_of_the_subset_is_refused():
    log = "INFO | Evaluated 29,000 tokens in 3.1s (9655.16 tokens/s)\nINFO | Loss (base 2): 5.3085, Perplexity: 39.64\n"
    with pytest.raises(ValueError, match="scored 29000 tokens, but the subset holds 29931"):
        lm_text.perplexity_line(log, 29931)


def test_the_subset_tokens_are_its_words_and_line_ends(demo):
    words = len((demo[0] / "tok" / "test.txt").read_text(encoding="utf-8").split())
    assert lm_text.subset_tokens(str(demo[0] / "data-bin" / "test")) == words + LINES["test"]
    with pytest.raises(ValueError, match="no binarised subset"):
        lm_text.subset_tokens(str(demo[0] / "data-bin" / "missing"))


@pytest.mark.parametrize("impl", ["mmap", "cached"])
def test_the_subset_tokens_are_counted_in_fairseqs_default_index_and_in_others(tmp_path, impl):
    """The default (mmap) index is read without fairseq; the others through it."""
    import torch
    from fairseq.data import indexed_dataset

    builder = indexed_dataset.make_builder(str(tmp_path / "test.bin"), impl, vocab_size=100)
    for line in ([4, 5, 2], [6, 2], [7, 8, 9, 10, 2]):
        builder.add_item(torch.IntTensor(line))
    builder.finalize(str(tmp_path / "test.idx"))
    assert indexed_dataset.infer_dataset_impl(str(tmp_path / "test")) == impl
    assert lm_text.subset_tokens(str(tmp_path / "test")) == 10
