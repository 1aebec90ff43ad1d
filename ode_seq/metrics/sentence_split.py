"""Offline, rule-based English sentence splitter for news summaries (no NLTK data needed).

ROUGE-Lsum is computed over sentences given one per line; Perl ROUGE-1.5.5 sees summaries that
way, so ``rouge-score`` must receive newline-separated sentences to agree with it.

A sentence ends after a whitespace-delimited word w whose core (w without trailing closing quotes
or brackets) ends in ``.``, ``!``, ``?``, ``...`` or ``…``, when the next word (without leading
opening quotes or brackets) starts with an upper-case letter, a digit or a currency sign, except:

* w is a title (``Mr.``, ``Dr.``, ``Sen.``, ``Gen.`` ...): never an end;
* w is ``No.``/``Vol.``/``p.``... followed by a number, or a month (``Jan.``) followed by a number;
* w is an ambiguous abbreviation (``U.S.``, ``a.m.``, ``Inc.``, ``Jr.``, ``St.``, a month, or a
  single-letter initial ``W.``): an end only when the next word is a common sentence opener
  (``The``, ``He``, ``But`` ...), so ``the U.S. The`` splits and ``George W. Bush`` does not.

Decimals (``3.5``), URLs and ``e.g.x`` never split because a boundary needs whitespace.
Existing line breaks are always boundaries.
"""

import re
from typing import List

CLOSERS = "\"')]}»”’"
OPENERS = "\"'([{«“‘"
TERMINATORS = (".", "!", "?", "…")

TITLES = frozenset(
    """mr mrs ms messrs mme mlle dr prof rev hon sen rep gov gen lt col maj capt cmdr adm brig
    sgt cpl pvt supt insp det pres atty vs v""".split()
)
MONTHS = frozenset("jan feb mar apr jun jul aug sep sept oct nov dec".split())
NUMBER_PREFIXES = frozenset("no nos vol vols p pp fig figs art sec ch para op".split())
AMBIGUOUS = frozenset(
    """inc ltd co corp plc llc bros jr sr st ave rd blvd mt ft etc dept univ assn approx est
    cf al""".split()
)
SENTENCE_OPENERS = frozenset(
    """The A An He She It They We I You His Her Its Their Our My This That These Those There
    But And Yet So Or In On At As After Before When While If Since Although Though However
    Meanwhile Now Then What Why How Who Where Some Many Most All Both Each Officials Police""".split()
)

_ACRONYM = re.compile(r"^(?:[A-Za-z]\.)+[A-Za-z]$")
_INITIAL = re.compile(r"^[A-Z]$")
_WORD = re.compile(r"\S+")


def _starts_sentence(core: str) -> bool:
    return bool(core) and (core[0].isupper() or core[0].isdigit() or core[0] in "$£€")


def _is_boundary(word: str, next_word: str) -> bool:
    """Whether a sentence ends after ``word`` given the following word ``next_word``."""
    core = word.rstrip(CLOSERS)
    next_core = next_word.lstrip(OPENERS)
    if not core.endswith(TERMINATORS) or not _starts_sentence(next_core):
        return False
    if core.endswith(("!", "?", "…", "...")):
        return True
    body = core[:-1].lstrip(OPENERS)
    lowered = body.lower()
    next_is_number = next_core[0].isdigit()
    if lowered in TITLES:
        return False
    if next_is_number and (lowered in NUMBER_PREFIXES or lowered in MONTHS):
        return False
    if lowered in AMBIGUOUS or lowered in MONTHS or _ACRONYM.match(body) or _INITIAL.match(body):
        return next_core.rstrip(",;:.") in SENTENCE_OPENERS
    return True


def split_sentences(text: str) -> List[str]:
    """Split ``text`` into sentences; each returned sentence is a stripped slice of ``text``."""
    sentences: List[str] = []
    for line in text.split("\n"):
        words = list(_WORD.finditer(line))
        start = 0
        for word, following in zip(words, words[1:]):
            if _is_boundary(word.group(), following.group()):
                sentences.append(line[start : word.end()].strip())
                start = following.start()
        tail = line[start:].strip()
        if tail:
            sentences.append(tail)
    return sentences


def one_sentence_per_line(text: str) -> str:
    """``text`` with its sentences joined by newlines: the input form ROUGE-Lsum expects."""
    return "\n".join(split_sentences(text))
