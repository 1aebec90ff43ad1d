#!/usr/bin/env python3
"""Build the bundled English–Spanish Bible corpus from Debian's SWORD modules.

Sources (both public domain): World English Bible (`engWEB2015eb`, package `sword-text-web`) and
Reina-Valera 1909 (`spaRV1909eb`, package `sword-text-sparv`), read with `diatheke -f internal`
(`-f plain` drops text). The pipeline:

1. Parse each module's OSIS dump into verses keyed by (book, chapter, verse). Psalm titles, which
   the WEB keeps in separate <title> elements while the RV1909 prints them inside verse 1, are
   prepended to the verse they head so both sides carry the same text.
2. Strip markup without gluing words: a run of tags becomes one space unless it touches
   punctuation that attaches to its neighbour (`God</w><w>created` → "God created",
   `light</w>,` → "light,"); a tag inside a word or before a Spanish clitic pronoun keeps the
   word whole (`poniéndo</w><transChange>le` → "poniéndole", see resolve_join_points). The
   RV1909's all-capital drop-cap words at chapter starts are truecased.
3. Keep references present in both modules with non-empty text, then check content: a lexicon
   learned from the data (best Dice partners of each English word stem) scores how many anchor
   words of a verse find a translation in the Spanish verse, over a 5-verse window. A verse is
   unaligned when another offset of the Spanish text explains the window better (the RV1909
   follows Hebrew verse numbering in some chapters), when the window score is too low, when the
   verse itself has almost no matching anchors, or when its character-length ratio is
   implausible. A chapter with half of its verses shifted or weak is dropped whole.
4. Split by whole chapters: chapters ordered by SHA-256 of "book chapter" fill the test split, then
   the valid split, up to a target number of verses each; the rest is training data.
5. Write `{train,valid,test}.tsv.gz` (columns ref, en, es; byte-reproducible gzip) and README.md.
"""

from __future__ import annotations

import argparse
import collections
import gzip
import hashlib
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

Ref = tuple[str, int, int]
SPLITS = ("train", "valid", "test")
VERSE_RANGE = "Gen 1:1-Rev 22:21"
DEBIAN_PACKAGES = ("diatheke", "sword-text-web", "sword-text-sparv")
INSTALL_HINT = f"apt-get update && apt-get install -y {' '.join(DEBIAN_PACKAGES)}"

VERSE_START = re.compile(
    r"(?m)^(?P<prefix>(?:<title[^>]*>.*?</title>)?(?:\s*<[^>]*/>)*\s*)"
    r"(?P<book>[A-Z][A-Za-z ()]*?) (?P<chapter>\d+):(?P<verse>\d+): "
)
TITLE = re.compile(r"<title[^>]*>(.*?)</title>")
NON_VERSE_TAIL = re.compile(r'<chapter eID=|<div [^>]*type="(?:book|glossary|introduction)"')
DROPPED_ELEMENTS = re.compile(r"<(title|speaker|note)\b[^>]*>.*?</\1>", re.S)
TAG_RUN = re.compile(r"\s*(?:<[^>]*>\s*)+")
TAGS_ONLY = re.compile(r"(?:<[^>]*>)+")
ATTACHES_RIGHT = set("“‘([¿¡—-")
ATTACHES_LEFT = set(",.;:!?”’)]—-")
JOIN_POINT = "\x00"
SPANISH_CLITICS = frozenset("me te se lo la le nos os los las les".split())
CAPS_RUN = re.compile(r"\b[A-ZÁÉÍÓÚÑÜ]{2,}(?: [A-ZÁÉÍÓÚÑÜ]{2,})*(?=[\s,.;:!?¿¡]+[A-ZÁÉÍÓÚÑÜ]?[a-záéíóúñü])")
WORD = re.compile(r"\w+")


@dataclass(frozen=True)
class AlignmentCheck:
    """Thresholds of the content check (step 3 of the module docstring)."""

    stem_length: int = 5  # words are compared by their first characters (crude stemming)
    min_pair_count: int = 3  # co-occurrences needed before a stem pair can enter the lexicon
    min_dice: float = 0.2  # Dice = 2·c(e,s) / (c(e) + c(s)) of a lexicon entry
    partners_per_word: int = 3  # best Spanish partners kept per English stem
    max_verse_share: float = 0.1  # words in more verses than this share are not anchors
    window: int = 2  # verses on each side of the scored verse
    max_offset: int = 6  # Spanish offsets tried against each English verse
    shift_margin: float = 0.1  # another offset must beat offset 0 by this much to flag a shift
    min_window_score: float = 0.2
    min_verse_score: float = 0.1
    min_verse_anchors: int = 5
    max_length_ratio: float = 1.8  # factor around the median es/en character ratio
    length_smoothing: int = 20  # characters added to both lengths so short verses may differ more
    chapter_drop_share: float = 0.5


def run_diatheke(module: str, diatheke: str) -> str:
    """Return `diatheke -b MODULE -f internal -k Gen 1:1-Rev 22:21` output, or exit with a fix."""
    if shutil.which(diatheke) is None:
        sys.exit(f"error: `{diatheke}` not found; install it with: {INSTALL_HINT}")
    result = subprocess.run(
        [diatheke, "-b", module, "-f", "internal", "-k", VERSE_RANGE],
        capture_output=True,
        text=True,
        encoding="utf-8",
        check=False,
    )
    if result.returncode != 0 or ": " not in result.stdout[:200]:
        sys.exit(
            f"error: diatheke returned no verses for module {module} "
            f"(rc={result.returncode}); install it with: {INSTALL_HINT}"
        )
    return result.stdout


def _join_at_tags(match: re.Match[str]) -> str:
    text, start, end = match.string, match.start(), match.end()
    if start == 0 or end == len(text):
        return ""
    if text[start - 1] in ATTACHES_RIGHT or text[end] in ATTACHES_LEFT:
        return ""
    if text[start - 1].isalnum() and text[end].isalnum() and TAGS_ONLY.fullmatch(match.group(0)):
        return JOIN_POINT
    return " "


def strip_markup(fragment: str) -> str:
    """Plain text of an OSIS fragment: headings/speakers/notes dropped, a tag run becomes a space,
    nothing (next to attaching punctuation) or, between two letters, a JOIN_POINT that
    resolve_join_points later turns into a space or nothing."""
    tail = NON_VERSE_TAIL.search(fragment)
    if tail:
        fragment = fragment[: tail.start()]
    fragment = DROPPED_ELEMENTS.sub(" ", fragment)
    return " ".join(TAG_RUN.sub(_join_at_tags, fragment).split())


def parse_verses(raw: str) -> dict[Ref, str]:
    """Verses of a `diatheke -f internal` dump; a heading new at this verse is prepended to it.

    diatheke repeats the last heading before every following verse, so a heading counts as new
    only when its markup (which carries unique sIDs) differs from the previous verse's.
    """
    starts = list(VERSE_START.finditer(raw))
    verses: dict[Ref, str] = {}
    previous_prefix = ""
    for current, following in zip(starts, starts[1:] + [None]):
        ref = (current["book"], int(current["chapter"]), int(current["verse"]))
        if ref in verses:
            raise ValueError(f"verse {format_ref(ref)} appears twice in the diatheke output")
        body = strip_markup(raw[current.end() : following.start() if following else len(raw)])
        prefix = current["prefix"]
        heading = TITLE.search(prefix)
        if heading and prefix != previous_prefix:
            body = f"{strip_markup(heading.group(1))} {body}".strip()
        previous_prefix = prefix
        verses[ref] = body
    return verses


def resolve_join_points(verses: dict[Ref, str], clitics: frozenset[str]) -> dict[Ref, str]:
    """Decide each tag that sat between two letters with no space ("left|right").

    The pieces stay one word only when "leftright" occurs elsewhere in the text as a whole word
    and either "left" never occurs on its own (a tag inside a word) or "right" is a clitic pronoun
    attached to a verb (Spanish "sáca|lo" → "sácalo"); otherwise they are two words
    ("God|created" → "God created").
    """
    known = collections.Counter(
        word.lower()
        for text in verses.values()
        for word in re.findall(rf"(?<![\w{JOIN_POINT}])\w+(?![\w{JOIN_POINT}])", text)
    )
    site = re.compile(rf"(\w+){JOIN_POINT}(?=(\w+))")

    def decide(match: re.Match[str]) -> str:
        left, right = match.group(1).lower(), match.group(2).lower()
        glued = known[left + right] > 0 and (known[left] == 0 or (right in clitics and len(left) > 1))
        return match.group(1) + ("" if glued else " ")

    return {ref: site.sub(decide, text) for ref, text in verses.items()}


def preferred_casing(texts: Iterable[str]) -> dict[str, str]:
    """Most frequent spelling of each word among its not-all-capital occurrences, keyed by lowercase."""
    counts: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    for text in texts:
        for word in WORD.findall(text):
            if not word.isupper() or len(word) == 1:
                counts[word.lower()][word] += 1
    return {lower: forms.most_common(1)[0][0] for lower, forms in counts.items()}


def truecase_drop_capitals(text: str, casing: dict[str, str]) -> str:
    """Rewrite all-capital words followed by a lowercase or capitalised word in their usual case,
    capitalising at a sentence start ("EN el principio" → "En el principio", "¡OH Jehová" → "¡Oh
    Jehová"); runs followed by more capitals (inscriptions such as "SANTIDAD Á JEHOVÁ.") stay."""

    def rewrite(match: re.Match[str]) -> str:
        words = [casing.get(w.lower(), w.lower()) for w in match.group(0).split(" ")]
        before = text[: match.start()].rstrip(" “‘(¿¡")
        if not before or before[-1] in ".!?":
            words[0] = words[0][:1].upper() + words[0][1:]
        return " ".join(words)

    return CAPS_RUN.sub(rewrite, text)


def format_ref(ref: Ref) -> str:
    return f"{ref[0]} {ref[1]}:{ref[2]}"


class VerseAligner:
    """Content check of reference-aligned verse pairs (step 3 of the module docstring)."""

    def __init__(self, english: Sequence[str], spanish: Sequence[str], check: AlignmentCheck):
        self.check = check
        self.english = [self._stems(t) for t in english]
        self.spanish = [self._stems(t) for t in spanish]
        self.lexicon = self._learn_lexicon()
        self.anchors = [[w for w in words if w in self.lexicon] for words in self.english]
        smoothing = check.length_smoothing
        self.length_log_ratio = [
            math.log((len(s) + smoothing) / (len(e) + smoothing)) for e, s in zip(english, spanish)
        ]

    def _stems(self, text: str) -> set[str]:
        return {w[: self.check.stem_length] for w in WORD.findall(text.lower())}

    def _learn_lexicon(self) -> dict[str, set[str]]:
        limit = self.check.max_verse_share * len(self.english)
        en_count = collections.Counter(w for words in self.english for w in words)
        es_count = collections.Counter(w for words in self.spanish for w in words)
        en_keep = {w for w, c in en_count.items() if self.check.min_pair_count <= c <= limit}
        es_keep = {w for w, c in es_count.items() if self.check.min_pair_count <= c <= limit}
        pairs: collections.Counter[tuple[str, str]] = collections.Counter()
        for en_words, es_words in zip(self.english, self.spanish):
            es_anchor = [w for w in es_words if w in es_keep]
            pairs.update((e, s) for e in en_words if e in en_keep for s in es_anchor)
        candidates: dict[str, list[tuple[float, str]]] = collections.defaultdict(list)
        for (e, s), together in pairs.items():
            dice = 2 * together / (en_count[e] + es_count[s])
            if together >= self.check.min_pair_count and dice >= self.check.min_dice:
                candidates[e].append((dice, s))
        return {
            e: {s for _, s in sorted(found, reverse=True)[: self.check.partners_per_word]}
            for e, found in candidates.items()
        }

    def _matches(self, i: int, j: int) -> int:
        if not 0 <= j < len(self.spanish):
            return 0
        return sum(not self.lexicon[w].isdisjoint(self.spanish[j]) for w in self.anchors[i])

    def _window_score(self, i: int, offset: int) -> float:
        lo, hi = max(0, i - self.check.window), min(len(self.english), i + self.check.window + 1)
        anchors = sum(len(self.anchors[t]) for t in range(lo, hi))
        return sum(self._matches(t, t + offset) for t in range(lo, hi)) / anchors if anchors else 0.0

    def problems(self) -> list[list[str]]:
        """Per verse pair, the failed checks among shift, weak, lexical, length."""
        median = statistics.median(self.length_log_ratio)
        max_log_ratio = math.log(self.check.max_length_ratio)
        offsets = [o for o in range(-self.check.max_offset, self.check.max_offset + 1) if o]
        result = []
        for i, anchors in enumerate(self.anchors):
            found = []
            own = self._window_score(i, 0)
            if max(self._window_score(i, o) for o in offsets) > own + self.check.shift_margin:
                found.append("shift")
            if own < self.check.min_window_score:
                found.append("weak")
            if (
                len(anchors) >= self.check.min_verse_anchors
                and self._matches(i, i) / len(anchors) < self.check.min_verse_score
            ):
                found.append("lexical")
            if abs(self.length_log_ratio[i] - median) > max_log_ratio:
                found.append("length")
            result.append(found)
        return result


def align(
    english: dict[Ref, str], spanish: dict[Ref, str], check: AlignmentCheck
) -> tuple[list[tuple[Ref, str, str]], collections.Counter[str]]:
    """Verse pairs that pass the content check, in canonical order, and counts of dropped verses."""
    dropped: collections.Counter[str] = collections.Counter()
    refs = []
    for ref in spanish:
        if ref not in english:
            dropped["missing in English"] += 1
        elif not english[ref] or not spanish[ref]:
            dropped["empty"] += 1
        else:
            refs.append(ref)
    aligner = VerseAligner([english[r] for r in refs], [spanish[r] for r in refs], check)
    problems = aligner.problems()
    per_chapter: dict[tuple[str, int], list[int]] = collections.defaultdict(lambda: [0, 0])
    for ref, found in zip(refs, problems):
        tally = per_chapter[ref[:2]]
        tally[0] += 1
        tally[1] += bool({"shift", "weak"} & set(found))
    shifted_chapters = {c for c, (n, bad) in per_chapter.items() if bad >= check.chapter_drop_share * n}
    kept = []
    for ref, found in zip(refs, problems):
        if ref[:2] in shifted_chapters:
            dropped["in a shifted chapter"] += 1
        elif found:
            dropped["unaligned: " + "+".join(found)] += 1
        else:
            kept.append((ref, english[ref], spanish[ref]))
    return kept, dropped


def split_by_chapter(
    pairs: list[tuple[Ref, str, str]], valid_verses: int, test_verses: int
) -> dict[str, list[tuple[Ref, str, str]]]:
    """Whole chapters, in SHA-256 order of "book chapter", fill test then valid; the rest trains."""
    sizes = collections.Counter(ref[:2] for ref, _, _ in pairs)
    order = sorted(sizes, key=lambda c: hashlib.sha256(f"{c[0]} {c[1]}".encode()).hexdigest())
    chapter_split: dict[tuple[str, int], str] = {}
    filled = {"test": 0, "valid": 0}
    for chapter in order:
        target = next((s for s, goal in (("test", test_verses), ("valid", valid_verses)) if filled[s] < goal), "train")
        chapter_split[chapter] = target
        if target != "train":
            filled[target] += sizes[chapter]
    splits: dict[str, list[tuple[Ref, str, str]]] = {s: [] for s in SPLITS}
    for pair in pairs:
        splits[chapter_split[pair[0][:2]]].append(pair)
    return splits


def write_tsv_gz(path: Path, pairs: list[tuple[Ref, str, str]]) -> None:
    """Gzipped TSV with header `ref en es`, mtime 0 and no file name so rebuilds are byte-identical."""
    with open(path, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", filename="", mtime=0) as gz:
        gz.write("ref\ten\tes\n".encode())
        for ref, en, es in pairs:
            gz.write(f"{format_ref(ref)}\t{en}\t{es}\n".encode())


def debian_package_versions(packages: Sequence[str] = DEBIAN_PACKAGES) -> str:
    """ "name version" of the installed Debian packages, comma-separated ("unknown" without dpkg)."""
    if shutil.which("dpkg-query") is None:
        return "unknown"
    result = subprocess.run(
        ["dpkg-query", "-W", "-f", "${Package} ${Version}\n", *packages], capture_output=True, text=True, check=False
    )
    return ", ".join(result.stdout.split("\n")[:-1]) or "unknown"


def render_readme(
    splits: dict[str, list[tuple[Ref, str, str]]],
    dropped: collections.Counter[str],
    file_sizes: dict[str, int],
    total_references: int,
) -> str:
    rows = "\n".join(
        f"| {s} | {len(splits[s])} | {len({r[:2] for r, _, _ in splits[s]})} | "
        f"{sum(len(en.split()) for _, en, _ in splits[s])} | "
        f"{sum(len(es.split()) for _, _, es in splits[s])} | {file_sizes[s] / 1e6:.2f} MB |"
        for s in SPLITS
    )
    drops = "\n".join(f"| {reason} | {n} |" for reason, n in sorted(dropped.items()))
    return f"""# Bundled English–Spanish Bible corpus

Verse-aligned World English Bible (English) and Reina-Valera 1909 (Spanish), split by whole
chapters (no verse of a valid or test chapter appears in training). Generated by
`examples/translation/build_bible_corpus.py`; do not edit by hand.

Files: `train.tsv.gz`, `valid.tsv.gz`, `test.tsv.gz` — UTF-8, tab-separated, header `ref en es`,
one verse per line, markup removed, whitespace normalised, not tokenised.

| split | verses | chapters | English words | Spanish words | size |
|-------|--------|----------|---------------|---------------|------|
{rows}

Total size: {sum(file_sizes.values()) / 1e6:.2f} MB.

Verses are paired by reference (book, chapter, verse) and then checked by content, because the
Reina-Valera module follows the Hebrew verse numbering in some chapters and merges or empties
verses there. Of {total_references} references in the Spanish module these were dropped:
*empty* (no text on one side); *in a shifted chapter* (half or more of its verses matched a
neighbouring verse better than their own); *unaligned*: *shift* (another offset of the Spanish
text fits a 5-verse window better), *weak* (few words of the window find their translation),
*lexical* (the verse itself has almost none), *length* (character-length ratio far from the
median).

| reason | verses |
|--------|--------|
{drops}

## Licences
- World English Bible (SWORD module `engWEB2015eb`, Debian package `sword-text-web`): public domain.
- Reina-Valera 1909 (SWORD module `spaRV1909eb`, Debian package `sword-text-sparv`): public domain.

## Rebuild
```
{INSTALL_HINT}
python examples/translation/build_bible_corpus.py --out-dir examples/translation/data
```
Built from: {debian_package_versions()}.
The build is deterministic: the same packages give byte-identical files.
"""


def build(
    out_dir: Path, english_module: str, spanish_module: str, diatheke: str, valid_verses: int, test_verses: int
) -> dict[str, list[tuple[Ref, str, str]]]:
    """Run the whole pipeline and write the corpus to out_dir atomically (temp dir, then rename)."""
    english = resolve_join_points(parse_verses(run_diatheke(english_module, diatheke)), frozenset())
    spanish = resolve_join_points(parse_verses(run_diatheke(spanish_module, diatheke)), SPANISH_CLITICS)
    casing = preferred_casing(spanish.values())
    spanish = {ref: truecase_drop_capitals(text, casing) for ref, text in spanish.items()}
    pairs, dropped = align(english, spanish, AlignmentCheck())
    splits = split_by_chapter(pairs, valid_verses, test_verses)
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out_dir, prefix=".build-") as tmp:
        sizes = {}
        for split in SPLITS:
            path = Path(tmp) / f"{split}.tsv.gz"
            write_tsv_gz(path, splits[split])
            sizes[split] = path.stat().st_size
        (Path(tmp) / "README.md").write_text(render_readme(splits, dropped, sizes, len(spanish)), encoding="utf-8")
        for name in [f"{s}.tsv.gz" for s in SPLITS] + ["README.md"]:
            os.replace(Path(tmp) / name, out_dir / name)
    return splits


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out-dir", type=Path, default=Path(__file__).parent / "data")
    parser.add_argument("--english-module", default="engWEB2015eb")
    parser.add_argument("--spanish-module", default="spaRV1909eb")
    parser.add_argument("--diatheke", default="diatheke")
    parser.add_argument("--valid-verses", type=int, default=1000)
    parser.add_argument("--test-verses", type=int, default=1000)
    args = parser.parse_args(argv)
    splits = build(
        args.out_dir, args.english_module, args.spanish_module, args.diatheke, args.valid_verses, args.test_verses
    )
    print(" ".join(f"{s}={len(splits[s])}" for s in SPLITS), "->", args.out_dir)


if __name__ == "__main__":
    main()
