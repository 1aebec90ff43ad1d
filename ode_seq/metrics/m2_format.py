"""The M2 format of gold grammatical-error annotations (CoNLL-2013/2014, NUCLE, FCE, W&I, ERRANT).

One block per sentence, blocks separated by blank lines::

    S <source tokens, space separated>
    A <start> <end>|||<type>|||<corr1>||<corr2>…|||<required>|||<comment>|||<annotator id>

``start``/``end`` are token offsets (end exclusive) into the S line; ``-NONE-`` is the empty
correction (a deletion); several ``||``-separated corrections are alternatives. An edit of type
``noop`` or with span ``-1 -1`` says that the annotator saw no error: it registers the annotator
for the sentence without adding an edit. Malformed input raises :class:`M2FormatError` naming the
file and line.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Sequence, Set, Tuple

from ode_seq.text_files import read_lines

EMPTY_CORRECTION = "-NONE-"
NOOP_TYPE = "noop"
FIELD_SEPARATOR = "|||"
ALTERNATIVE_SEPARATOR = "||"


class M2FormatError(ValueError):
    """A malformed M2 file; the message reads ``FILE:LINE: problem``."""

    def __init__(self, path: str, line_number: int, problem: str):
        super().__init__(f"{path}:{line_number}: {problem}")


@dataclass(frozen=True)
class GoldEdit:
    """Replace ``source[start:end]`` by one of ``corrections`` (each a space-joined token string)."""

    start: int
    end: int
    corrections: Tuple[str, ...]
    error_type: str = "-"

    def matches(self, start: int, end: int, correction: str) -> bool:
        """True when a system edit with this span and correction string is one of ours."""
        return start == self.start and end == self.end and correction in self.corrections


@dataclass
class M2Sentence:
    """A source sentence and, per annotator id, that annotator's edits in file order."""

    source: Tuple[str, ...]
    annotations: Dict[int, List[GoldEdit]] = field(default_factory=dict)

    def edits_of(self, annotator: int) -> List[GoldEdit]:
        """The annotator's edits; none when the annotator did not annotate this sentence."""
        return self.annotations.get(annotator, [])


def read_m2(path: str) -> List[M2Sentence]:
    """Parse an M2 file (read by `ode_seq.text_files`)."""
    return parse_m2(read_lines(path), path)


def parse_m2(lines: Sequence[str], path: str = "<m2>") -> List[M2Sentence]:
    """Parse M2 lines (without newlines); ``path`` only names the source in error messages."""
    sentences: List[M2Sentence] = []
    current: M2Sentence | None = None
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            current = None
            continue
        if line == "S" or line.startswith("S "):
            if current is not None:
                raise M2FormatError(path, number, "a second S line in one block; separate sentences by a blank line")
            current = M2Sentence(source=tuple(line[2:].split()))
            sentences.append(current)
        elif line.startswith("A "):
            if current is None:
                raise M2FormatError(path, number, "an A line before any S line of its block")
            _add_annotation(current, line[2:], path, number)
        else:
            raise M2FormatError(path, number, f"expected a line starting with 'S ' or 'A ', got {line[:40]!r}")
    return sentences


def _add_annotation(sentence: M2Sentence, body: str, path: str, number: int) -> None:
    fields = body.split(FIELD_SEPARATOR)
    if len(fields) != 6:
        raise M2FormatError(
            path,
            number,
            f"an A line needs 6 '|||'-separated fields "
            f"(span, type, corrections, required, comment, annotator), got {len(fields)}",
        )
    error_type, corrections = fields[1].strip(), fields[2]
    try:
        start, end = map(int, fields[0].split())
    except ValueError:
        raise M2FormatError(path, number, f"the span must be two integers 'START END', got {fields[0]!r}") from None
    try:
        annotator = int(fields[5])
    except ValueError:
        raise M2FormatError(path, number, f"the annotator id must be an integer, got {fields[5]!r}") from None
    if annotator < 0:
        raise M2FormatError(path, number, f"the annotator id must be >= 0, got {annotator}")
    edits = sentence.annotations.setdefault(annotator, [])
    if error_type == NOOP_TYPE or (start, end) == (-1, -1):
        return
    if not 0 <= start <= end <= len(sentence.source):
        raise M2FormatError(
            path,
            number,
            f"span {start} {end} lies outside the sentence's "
            f"{len(sentence.source)} tokens (need 0 <= start <= end <= length)",
        )
    alternatives = tuple(
        "" if text == EMPTY_CORRECTION else " ".join(text.split()) for text in corrections.split(ALTERNATIVE_SEPARATOR)
    )
    edits.append(GoldEdit(start, end, alternatives, error_type))


def annotator_ids(sentences: Iterable[M2Sentence]) -> Set[int]:
    """All annotator ids of a file; ``{0}`` for a file without annotations (as the scorer assumes)."""
    ids = {annotator for sentence in sentences for annotator in sentence.annotations}
    return ids or {0}


def check_annotator(sentences: Sequence[M2Sentence], annotator: int, path: str) -> None:
    """Raise ``ValueError`` when ``annotator`` appears nowhere in the file."""
    known = annotator_ids(sentences)
    if annotator not in known:
        raise ValueError(
            f"unknown annotator id {annotator}: {path} has annotator ids {', '.join(map(str, sorted(known)))}"
        )


def apply_edits(source: Sequence[str], edits: Iterable[GoldEdit]) -> Tuple[List[str], int]:
    """The corrected token list from the first correction of each edit, and the number of edits
    skipped because they overlap an edit already applied (edits are taken in (start, end) order,
    file order among equal spans; insertions at one position stay in file order)."""
    ordered = sorted(enumerate(edits), key=lambda item: (item[1].start, item[1].end, item[0]))
    target: List[str] = []
    position = 0
    skipped = 0
    for _, edit in ordered:
        if edit.start < position:
            skipped += 1
            continue
        target.extend(source[position : edit.start])
        target.extend(edit.corrections[0].split())
        position = edit.end
    target.extend(source[position:])
    return target, skipped


def noop_line(annotator: int) -> str:
    """The A line saying that ``annotator`` found nothing to correct."""
    return f"A -1 -1|||{NOOP_TYPE}|||{EMPTY_CORRECTION}|||REQUIRED|||-NONE-|||{annotator}"


def format_block(source: Sequence[str], annotations: Dict[int, Sequence[Tuple[int, int, str, str]]]) -> str:
    """An M2 block (without the trailing blank line) from ``{annotator: [(start, end, type, correction)]}``;
    an annotator without edits gets a ``noop`` line."""
    lines = ["S " + " ".join(source)]
    for annotator in sorted(annotations):
        edits = annotations[annotator]
        if not edits:
            lines.append(noop_line(annotator))
        for start, end, error_type, correction in edits:
            text = correction if correction else EMPTY_CORRECTION
            lines.append(f"A {start} {end}|||{error_type}|||{text}|||REQUIRED|||-NONE-|||{annotator}")
    return "\n".join(lines)
