"""Text inputs, read the same way by every tool: UTF-8 lines, each ended by a line feed.

The rule (docs/reliability.md, "Text encodings"), for hypotheses, references, M2 files, corpora
and sentences alike:

* A UTF-8 byte-order mark (EF BB BF) at the start of a file is an encoding signature, not text:
  it is removed. A line ends at ``\\n``; one ``\\r`` before it (Windows CRLF), or at the end of
  the file, belongs to the line end and is removed. With these two, a file saved with a BOM or
  CRLF line ends reads exactly as the clean file.
* Nothing else is changed: no Unicode normalisation, whitespace kept, and lines are split at
  ``\\n`` only (U+2028, U+0085 and form feeds are text), so a scorer sees the clean file's text
  as stock sacreBLEU would.
* Refused with :class:`TextInputError`, which names file, line and byte offset (counted from 0 at
  the file's first byte): bytes that are not UTF-8 (Latin-1, UTF-16 files), NUL bytes, a ``\\r``
  that does not end a line (classic Mac line ends, which would merge lines), and a byte-order
  mark after the start of the file (files concatenated with their marks).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import BinaryIO, Iterator, List, Optional, Tuple, Union

BYTE_ORDER_MARK = b"\xef\xbb\xbf"
UTF16_MARKS = (b"\xff\xfe", b"\xfe\xff")
_LONE_CARRIAGE_RETURN = re.compile(rb"\r(?!\n|\Z)")


class TextInputError(ValueError):
    """A text input that cannot be read as UTF-8 lines; the message reads ``FILE:LINE: byte N: …``."""

    def __init__(self, name: str, line: int, offset: int, problem: str):
        super().__init__(f"{name}:{line}: byte {offset}: {problem}")


NOT_UTF8 = "byte 0x{:02X} is not UTF-8; re-encode the file as UTF-8 (e.g. iconv -f LATIN1 -t UTF-8 if it is Latin-1)"
UTF16 = "the file is UTF-16 (byte-order mark {}); convert it: iconv -f UTF-16 -t UTF-8"
NUL = "a NUL byte; this is binary data or UTF-16, not UTF-8 text"
INNER_MARK = (
    "a byte-order mark (EF BB BF) inside the file, as left by concatenating files that start with "
    "one; remove it: sed 's/\\xEF\\xBB\\xBF//g'"
)
LONE_CR = (
    "a carriage return (\\r) that does not end a line (old Mac line ends?); end lines with \\n or "
    "\\r\\n, e.g. tr '\\r' '\\n'"
)


def _problem(data: bytes, at_file_start: bool, undecodable: Optional[int]) -> Optional[Tuple[int, str]]:
    """(index into ``data``, what is wrong there) for the first refused byte, or None;
    ``undecodable`` is where UTF-8 decoding failed (None: it did not)."""
    lone_cr = _LONE_CARRIAGE_RETURN.search(data)
    found = [
        (data.find(b"\x00"), NUL),
        (data.find(BYTE_ORDER_MARK), INNER_MARK),
        (lone_cr.start() if lone_cr else -1, LONE_CR),
    ]
    if undecodable == 0 and at_file_start and data.startswith(UTF16_MARKS):
        found.append((0, UTF16.format(data[:2].hex(" ").upper())))
    elif undecodable is not None:
        found.append((undecodable, NOT_UTF8.format(data[undecodable])))
    return min(((index, what) for index, what in found if index >= 0), default=None)


def decode_lines(data: bytes, name: str, first_line: int = 1, first_offset: int = 0) -> List[str]:
    """The lines of ``data`` (whole lines of the file ``name``, starting at line ``first_line`` and
    byte ``first_offset``) under the module's rule, without their line ends."""
    at_file_start = first_offset == 0
    if at_file_start and data.startswith(BYTE_ORDER_MARK):
        data, first_offset = data[len(BYTE_ORDER_MARK) :], len(BYTE_ORDER_MARK)
    try:
        text, undecodable = data.decode("utf-8"), None
    except UnicodeDecodeError as error:
        text, undecodable = "", error.start
    if undecodable is not None or any(byte in data for byte in (b"\x00", b"\r", BYTE_ORDER_MARK)):
        problem = _problem(data, at_file_start, undecodable)
        if problem:
            index, what = problem
            raise TextInputError(name, first_line + data.count(b"\n", 0, index), first_offset + index, what)
    text = text.replace("\r\n", "\n")
    if text.endswith("\r"):
        text = text[:-1]
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return lines


def read_lines(path: Union[str, Path]) -> List[str]:
    """All lines of the file ``path`` (see the module docstring); OSError when it cannot be read."""
    return decode_lines(Path(path).read_bytes(), str(path))


def iter_lines(stream: BinaryIO, name: str) -> Iterator[str]:
    """The lines of a binary stream (e.g. ``sys.stdin.buffer``) one by one, checked as they come."""
    offset = 0
    for number, raw in enumerate(stream, 1):
        yield from decode_lines(raw, name, number, offset)
        offset += len(raw)
