"""Sentences fed to fairseq-interactive with the plugin are read by ``ode_seq.text_files`` (fix
``interactive_input``): a byte-order mark and CRLF line ends translate as the clean text (before:
the first word became <unk>); NUL and non-UTF-8 bytes are refused naming the input, line and byte
(before: translated as <unk> without a word)."""

from __future__ import annotations

import os
import re
import subprocess

import pytest

from tests.e2e.cli import BIN, ROOT
from tests.reliability.corpus import tool_env

CLEAN = b"w1 w2 w3\nw4 w5\n"
CHECKPOINT = "tests/fixtures/checkpoints/rk4.pt"


def interactive(stdin: bytes, *options: str):
    """fairseq-interactive on the RK4 fixture checkpoint (its dictionaries are in tests/fixtures)."""
    args = ["tests/fixtures", "--user-dir", "user_dir", "--path", CHECKPOINT, "--source-lang", "src"]
    args += ["--target-lang", "tgt", "--beam", "2", *options]
    return subprocess.run(
        [os.path.join(BIN, "fairseq-interactive"), *args], input=stdin, capture_output=True, cwd=ROOT, env=tool_env()
    )


def translations(output: bytes):
    return re.findall(rb"^[SH]-\d+\t.*$", output, re.M)


def test_byte_order_mark_and_crlf_translate_as_the_clean_sentences():
    clean = interactive(CLEAN)
    assert clean.returncode == 0 and len(translations(clean.stdout)) == 4
    damaged = interactive(b"\xef\xbb\xbf" + CLEAN.replace(b"\n", b"\r\n"))
    assert damaged.returncode == 0 and translations(damaged.stdout) == translations(clean.stdout)


@pytest.mark.parametrize("bad", [b"\xe9", b"\x00"], ids=["Latin-1", "NUL"])
def test_undecodable_sentence_is_refused_naming_line_and_byte(bad):
    result = interactive(CLEAN.replace(b"w4", b"w4" + bad))
    assert result.returncode != 0
    assert b"standard input:2: byte 11: " in result.stderr


def test_undecodable_input_file_is_refused_naming_file_line_and_byte(tmp_path):
    sentences = tmp_path / "sentences.txt"
    sentences.write_bytes(CLEAN.replace(b"w4", b"w4\xe9"))
    result = interactive(b"", "--input", str(sentences))
    assert result.returncode != 0
    assert f"{sentences}:2: byte 11: byte 0xE9 is not UTF-8".encode() in result.stderr
