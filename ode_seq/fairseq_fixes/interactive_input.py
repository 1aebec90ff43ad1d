"""fairseq-interactive's sentences read as every other text input of ode-seq."""

from __future__ import annotations

import contextlib
import sys
from typing import BinaryIO, Iterator, List

from ode_seq.text_files import iter_lines

from .fix import FairseqFix

STANDARD_INPUT = "-"


@contextlib.contextmanager
def _opened(input: str) -> Iterator[BinaryIO]:
    if input == STANDARD_INPUT:
        yield sys.stdin.buffer
    else:
        with open(input, "rb") as stream:
            yield stream


def checked_buffered_read(input: str, buffer_size: int) -> Iterator[List[str]]:
    """fairseq's ``buffered_read``: batches of up to ``buffer_size`` sentences of ``input`` ("-" for
    standard input), each stripped of surrounding whitespace, read by `ode_seq.text_files`."""
    name = "standard input" if input == STANDARD_INPUT else input
    buffer: List[str] = []
    with _opened(input) as stream:
        for line in iter_lines(stream, name):
            buffer.append(line.strip())
            if len(buffer) >= buffer_size:
                yield buffer
                buffer = []
    if buffer:
        yield buffer


class InteractiveInput(FairseqFix):
    """fairseq-interactive reads its sentences with ``fileinput``, decoding standard input in the
    locale's encoding: a UTF-8 byte-order mark stays glued to the first word, which becomes
    ``<unk>``; a NUL byte passes into a token; bytes that are not UTF-8 become ``<unk>`` (or a
    UnicodeDecodeError traceback, depending on the locale). Each translates without a word. The
    fix: ``fairseq_cli.interactive.buffered_read`` reads the bytes through `ode_seq.text_files`,
    so a byte-order mark and CRLF line ends read as the clean text and anything else is refused
    naming the input, line and byte. fairseq-interactive imports its module before it loads the
    plugin (while parsing ``--user-dir``); in any other process there is nothing to patch."""

    name = "interactive_input"
    patches = ("fairseq_cli.interactive.buffered_read",)

    def apply(self) -> None:
        interactive = sys.modules.get("fairseq_cli.interactive")
        if interactive is not None:
            interactive.buffered_read = checked_buffered_read
