"""Text encodings in the example pipelines' Python helpers that read corpora, M2 files and sentences.

Every helper reads through ``ode_seq.text_files``: an input saved with a byte-order mark and CRLF
line ends gives byte for byte the output of the clean input; Latin-1 or NUL bytes are refused
naming file, line and byte offset, with a non-zero exit and no output written. (The metric tools
are covered in tests/metrics/test_text_inputs.py, fairseq-interactive in test_interactive_input.py.)
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple

import pytest

from tests.e2e.cli import ROOT

EXAMPLES = Path(ROOT) / "examples"
SOURCES = ["The cat sat on the mat .", "There is a dog in the garden .", "He went to school every day ."]
TARGETS = ["Die Katze saß auf der Matte .", "Im Garten ist ein Hund .", "Er ging jeden Tag zur Schule ."]
M2_TEXT = (
    "S He go to school .\nA 1 2|||R:VERB:SVA|||goes|||REQUIRED|||-NONE-|||0\n\n"
    "S All fine .\nA -1 -1|||noop|||-NONE-|||REQUIRED|||-NONE-|||0\n\n"
    "S She like apples .\nA 1 2|||R:VERB:SVA|||likes|||REQUIRED|||-NONE-|||0\n"
)
STORY_URLS = {
    split: [f"http://www.cnn.com/2013/03/0{i}/{split}-{i}" for i in range(1, 4)] for split in ("train", "val", "test")
}


def lines(text_lines: List[str]) -> bytes:
    return "".join(line + "\n" for line in text_lines).encode()


def story(index: int) -> bytes:
    return (
        f"LONDON (CNN) -- Officials said on Jan. {index} that the bridge would cost $3.{index} billion.\n\n"
        f"The plan follows a 2009 report.\n\n@highlight\n\nThe bridge costs $3.{index} billion\n\n"
        "@highlight\n\nA report came first\n"
    ).encode()


def story_name(url: str) -> str:
    return hashlib.sha1(url.encode()).hexdigest() + ".story"


def stories_inputs() -> Dict[str, bytes]:
    files = {f"url_lists/all_{split}.txt": lines(urls) for split, urls in STORY_URLS.items()}
    for index, url in enumerate(u for urls in STORY_URLS.values() for u in urls):
        files[f"stories/{story_name(url)}"] = story(index)
    return files


def table_records(split: str) -> List[Dict[str, str]]:
    return [
        {
            "id": f"{split}{i}",
            "article": f"Officials said the bridge would cost $3.{i} billion .",
            "highlights": f"Cost {i}",
        }
        for i in range(3)
    ]


def csv_table(records: List[Dict[str, str]]) -> bytes:
    rows = ["id,article,highlights"] + [f'{r["id"]},"{r["article"]}","{r["highlights"]}"' for r in records]
    return lines(rows)


@dataclass(frozen=True)
class Helper:
    """One helper run: its input files, the one to damage, its command line and what it writes."""

    inputs: Dict[str, bytes]
    damaged: str
    command: Callable[[Path], List[str]]
    outputs: Tuple[str, ...] = ()


def python(script: str, *args: str) -> List[str]:
    return [sys.executable, str(EXAMPLES / script), *args]


def extract_stories(directory: Path) -> List[str]:
    return python(
        "summarization/cnndm_extract.py", "stories", "--stories", str(directory / "stories"), "--url-lists",
        str(directory / "url_lists"), "--out-dir", str(directory / "raw"),
    )  # fmt: skip


FIRST_STORY = f"stories/{story_name(STORY_URLS['test'][0])}"
HELPERS = {
    "translation parallel_text.py check": Helper(
        {"corpus.en": lines(SOURCES), "corpus.de": lines(TARGETS)},
        "corpus.de",
        lambda d: python("translation/parallel_text.py", "check", str(d / "corpus"), "en", "de"),
    ),
    "translation parallel_text.py clean": Helper(
        {"train.en": lines(SOURCES), "train.de": lines(TARGETS)},
        "train.en",
        lambda d: python("translation/parallel_text.py", "clean", str(d / "train"), str(d / "out"), "en", "de"),
        ("out.en", "out.de"),
    ),
    "translation parallel_text.py sgm": Helper(
        {"test.sgm": lines(['<srcset setid="t">', *(f'<seg id="{i}">{s}</seg>' for i, s in enumerate(SOURCES))])},
        "test.sgm",
        lambda d: python("translation/parallel_text.py", "sgm", str(d / "test.sgm")),
    ),
    "gec parallel_text.py": Helper(
        {"lang8.src": lines(SOURCES), "lang8.tgt": lines(SOURCES[::-1])},
        "lang8.src",
        lambda d: python(
            "gec/parallel_text.py",
            "--src",
            str(d / "lang8.src"),
            "--tgt",
            str(d / "lang8.tgt"),
            "--tokenize",
            "none",
            "--out-prefix",
            str(d / "out"),
        ),
        ("out.src", "out.tgt"),
    ),
    "gec m2_to_parallel.py": Helper(
        {"nucle.m2": M2_TEXT.encode()},
        "nucle.m2",
        lambda d: python("gec/m2_to_parallel.py", str(d / "nucle.m2"), "--out-prefix", str(d / "out")),
        ("out.src", "out.tgt"),
    ),
    "summarization cnndm_extract.py stories (a story)": Helper(
        stories_inputs(),
        FIRST_STORY,
        extract_stories,
        tuple(f"raw/{split}.{kind}" for split in ("train", "valid", "test") for kind in ("source", "target", "ids")),
    ),
    "summarization cnndm_extract.py stories (a URL list)": Helper(
        stories_inputs(),
        "url_lists/all_test.txt",
        extract_stories,
        ("raw/test.source", "raw/test.target", "raw/test.ids"),
    ),
    "summarization cnndm_extract.py table (CSV and JSONL)": Helper(
        {
            "tables/train.csv": csv_table(table_records("train")),
            "tables/validation.csv": csv_table(table_records("valid")),
            "tables/test.jsonl": lines([json.dumps(r, ensure_ascii=False) for r in table_records("test")]),
        },
        "tables/train.csv",
        lambda d: python(
            "summarization/cnndm_extract.py", "table", "--input-dir", str(d / "tables"), "--out-dir", str(d / "raw")
        ),
        ("raw/train.source", "raw/train.target", "raw/train.ids"),
    ),
    "translation show_translations.py": Helper(
        {
            "generate-test.txt": lines([f"H-{i}\t-0.5\t{t}" for i, t in enumerate(TARGETS)]),
            "test.en": lines(SOURCES),
            "test.de": lines(TARGETS),
        },
        "test.en",
        lambda d: python(
            "translation/show_translations.py",
            "--generated",
            str(d / "generate-test.txt"),
            "--source",
            str(d / "test.en"),
            "--reference",
            str(d / "test.de"),
            "--lang",
            "de",
            "--min-words",
            "1",
        ),
    ),
}


def run_helper(helper: Helper, directory: Path, damaged: Optional[bytes] = None) -> subprocess.CompletedProcess:
    for name, content in helper.inputs.items():
        path = directory / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(damaged if name == helper.damaged and damaged is not None else content)
    return subprocess.run(helper.command(directory), capture_output=True, cwd=ROOT, timeout=120)


def bom_and_crlf(data: bytes) -> bytes:
    return b"\xef\xbb\xbf" + data.replace(b"\n", b"\r\n")


@pytest.mark.parametrize("name", HELPERS)
def test_helper_reads_a_file_with_byte_order_mark_and_crlf_as_the_clean_file(name, tmp_path):
    helper = HELPERS[name]
    (tmp_path / "clean").mkdir(), (tmp_path / "damaged").mkdir()
    clean = run_helper(helper, tmp_path / "clean")
    assert clean.returncode == 0, clean.stderr.decode()
    damaged = run_helper(helper, tmp_path / "damaged", bom_and_crlf(helper.inputs[helper.damaged]))
    assert damaged.returncode == 0, damaged.stderr.decode()
    assert damaged.stdout.replace(b"/damaged", b"/clean") == clean.stdout
    for output in helper.outputs:
        assert (tmp_path / "damaged" / output).read_bytes() == (tmp_path / "clean" / output).read_bytes(), output


@pytest.mark.parametrize("bad", [b"\xe9", b"\x00"], ids=["Latin-1", "NUL"])
@pytest.mark.parametrize("name", HELPERS)
def test_helper_refuses_undecodable_input_naming_file_line_and_byte(name, bad, tmp_path):
    helper = HELPERS[name]
    clean = helper.inputs[helper.damaged]
    second_line = clean.index(b"\n") + 1
    result = run_helper(helper, tmp_path, clean[:second_line] + bad + clean[second_line:])
    assert result.returncode != 0
    assert f"{tmp_path / helper.damaged}:2: byte {second_line}: ".encode() in result.stderr, result.stderr.decode()[
        -2000:
    ]
    assert not [output for output in helper.outputs if (tmp_path / output).exists()]


@pytest.fixture(scope="module")
def sentencepiece_model(tmp_path_factory) -> Path:
    directory = tmp_path_factory.mktemp("spm")
    (directory / "train.txt").write_bytes(lines(SOURCES * 20 + TARGETS * 20))
    subprocess.run(
        python(
            "translation/sentencepiece_tool.py",
            "train",
            "--model-prefix",
            str(directory / "spm"),
            "--vocab-size",
            "40",
            "--threads",
            "1",
            str(directory / "train.txt"),
        ),
        check=True,
        capture_output=True,
        cwd=ROOT,
        timeout=120,
    )
    return directory / "spm.model"


def encode(model: Path, text: bytes) -> subprocess.CompletedProcess:
    command = python("translation/sentencepiece_tool.py", "encode", "--model", str(model))
    return subprocess.run(command, input=text, capture_output=True, cwd=ROOT, timeout=120)


def test_sentencepiece_encoding_reads_standard_input_with_byte_order_mark_and_crlf_as_clean(sentencepiece_model):
    clean = encode(sentencepiece_model, lines(TARGETS))
    assert clean.returncode == 0 and len(clean.stdout.splitlines()) == len(TARGETS)
    assert encode(sentencepiece_model, bom_and_crlf(lines(TARGETS))).stdout == clean.stdout


@pytest.mark.parametrize("bad", [b"\xe9", b"\x00"], ids=["Latin-1", "NUL"])
def test_sentencepiece_encoding_refuses_undecodable_standard_input_naming_line_and_byte(sentencepiece_model, bad):
    clean = lines(TARGETS)
    second_line = clean.index(b"\n") + 1
    result = encode(sentencepiece_model, clean[:second_line] + bad + clean[second_line:])
    assert result.returncode != 0
    assert f"standard input:2: byte {second_line}: ".encode() in result.stderr
