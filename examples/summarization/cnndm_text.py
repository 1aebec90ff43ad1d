"""Cleaning of CNN/DailyMail examples as in the standard non-anonymised preparation.

A ``.story`` file is article paragraphs, then highlights each preceded by an ``@highlight`` line.
Per line (after stripping): empty lines are dropped; a line not ending in an end token
(``. ! ? ... ' ` " ’ ” )``) gets `` .`` appended; every line after the first ``@highlight`` marker
that is not itself a marker is a highlight. article = paragraphs joined by a space,
summary = highlights joined by a space. Text is kept cased and untokenised (subword models
tokenise later). All whitespace runs, including Unicode line separators, become one space, so an
example always stays on one line.

Bylines (on by default, ``keep_bylines`` turns this off): a leading CNN dateline
``WASHINGTON (CNN) -- `` / ``(CNN)`` and a leading Daily Mail header
``By . <author> . PUBLISHED: . <time> . | . UPDATED: . <time> .`` are removed from the article.
"""

import re
from dataclasses import dataclass
from typing import List, Optional, Tuple

HIGHLIGHT_MARKER = "@highlight"
END_TOKENS = (".", "!", "?", "...", "'", "`", '"', "\u2019", "\u201d", ")")

_CNN_DATELINE = re.compile(r"^(?:[A-Z][\w .,'/-]{0,60}?\s*)?\((?:CNN[\w ]*|[\w.]+\.com)\)\s*(?:--\s*)?")
_DM_TIME = r"[^.|]{1,60}? \. "
_DM_HEADER = re.compile(
    r"^(?:By \. [^.]{1,80}? \. (?:and \. [^.]{1,80}? \. )?)?"
    rf"(?:PUBLISHED: \. {_DM_TIME}(?:\| \. )?)?"
    rf"(?:UPDATED: \. {_DM_TIME}|Last updated at {_DM_TIME})?"
)


@dataclass(frozen=True)
class Example:
    """One cleaned example; ``skip_reason`` is set when it must not be written."""

    article: str
    summary: str
    skip_reason: Optional[str] = None


def normalise_whitespace(text: str) -> str:
    """Collapse every Unicode whitespace run (\\r, \\u2028, tabs ...) into one space."""
    return " ".join(text.split())


def fix_missing_period(line: str) -> str:
    """Append `` .`` to a non-empty line that does not end in an end token."""
    if not line or line.startswith(HIGHLIGHT_MARKER) or line.endswith(END_TOKENS):
        return line
    return line + " ."


def split_story(text: str) -> Tuple[List[str], List[str]]:
    """(article lines, highlights) of a ``.story`` file, each line cleaned and non-empty."""
    article: List[str] = []
    highlights: List[str] = []
    in_highlights = False
    for raw_line in text.split("\n"):
        line = fix_missing_period(normalise_whitespace(raw_line))
        if not line:
            continue
        if line.startswith(HIGHLIGHT_MARKER):
            in_highlights = True
        elif in_highlights:
            highlights.append(line)
        else:
            article.append(line)
    return article, highlights


def strip_byline(article: str) -> str:
    """Remove a leading CNN dateline and a leading Daily Mail author/time header."""
    article = _DM_HEADER.sub("", article, count=1)
    return _CNN_DATELINE.sub("", article, count=1)


def make_example(article: str, highlights: List[str], keep_bylines: bool = False) -> Example:
    """Join and clean; an empty article or empty summary yields a skip reason."""
    article = normalise_whitespace(article)
    if not keep_bylines:
        article = strip_byline(article)
    summary = normalise_whitespace(" ".join(highlights))
    if not summary:
        return Example(article, summary, "no highlights")
    if not article:
        return Example(article, summary, "empty article")
    return Example(article, summary)


def example_from_story(text: str, keep_bylines: bool = False) -> Example:
    """Clean one ``.story`` file's text."""
    article_lines, highlights = split_story(text)
    return make_example(" ".join(article_lines), highlights, keep_bylines)


def example_from_record(article: str, highlights: str, keep_bylines: bool = False) -> Example:
    """Clean one ``article``/``highlights`` record (highlights newline-separated, one per line)."""
    lines = [fix_missing_period(normalise_whitespace(line)) for line in highlights.split("\n")]
    return make_example(article, [line for line in lines if line], keep_bylines)
