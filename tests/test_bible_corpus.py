"""The bundled English–Spanish Bible corpus and its builder (examples/translation/build_bible_corpus.py)."""

from __future__ import annotations

import collections
import gzip
import importlib.util
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
DATA = REPO_ROOT / "examples" / "translation" / "data"
SPLITS = ("train", "valid", "test")

_spec = importlib.util.spec_from_file_location(
    "build_bible_corpus", REPO_ROOT / "examples" / "translation" / "build_bible_corpus.py"
)
builder = importlib.util.module_from_spec(_spec)
sys.modules["build_bible_corpus"] = builder  # dataclasses look their module up there
_spec.loader.exec_module(builder)


def read_split(directory: Path, split: str) -> list[tuple[str, str, str]]:
    with gzip.open(directory / f"{split}.tsv.gz", "rt", encoding="utf-8") as f:
        header, *rows = [line.rstrip("\n").split("\t") for line in f]
    assert header == ["ref", "en", "es"]
    return [tuple(row) for row in rows]


def chapter(ref: str) -> str:
    return ref.rsplit(":", 1)[0]


@pytest.fixture(scope="module")
def corpus() -> dict[str, list[tuple[str, str, str]]]:
    return {split: read_split(DATA, split) for split in SPLITS}


# --- the committed corpus -------------------------------------------------------------------


def test_committed_split_sizes_match_the_readme_and_the_chapter_split_targets(corpus):
    readme = (DATA / "README.md").read_text(encoding="utf-8")
    for split in SPLITS:
        assert re.search(rf"^\| {split} \| {len(corpus[split])} \|", readme, re.M), split
    assert 28_000 <= len(corpus["train"]) <= 29_500
    assert 1_000 <= len(corpus["valid"]) <= 1_100 and 1_000 <= len(corpus["test"]) <= 1_100
    assert sum(p.stat().st_size for p in DATA.glob("*.tsv.gz")) < 6_000_000


def test_no_chapter_is_shared_between_train_valid_and_test(corpus):
    chapters = {split: {chapter(ref) for ref, _, _ in rows} for split, rows in corpus.items()}
    assert not chapters["train"] & chapters["test"]
    assert not chapters["train"] & chapters["valid"]
    assert not chapters["valid"] & chapters["test"]


def test_every_committed_pair_is_unique_non_empty_and_markup_free(corpus):
    refs = [ref for rows in corpus.values() for ref, _, _ in rows]
    assert len(refs) == len(set(refs))
    for rows in corpus.values():
        for ref, en, es in rows:
            assert en.strip() and es.strip(), ref
            assert not re.search(r"[<>\t\x00]", en + es), ref
            assert en == " ".join(en.split()) and es == " ".join(es.split()), ref


def test_known_verses_are_aligned_and_unglued(corpus):
    rows = {ref: (en, es) for split in corpus.values() for ref, en, es in split}
    assert rows["Genesis 1:1"] == (
        "In the beginning, God created the heavens and the earth.",
        "En el principio crió Dios los cielos y la tierra.",
    )
    en, es = rows["Psalms 3:1"]  # WEB keeps the title apart; RV1909 prints it in verse 1
    assert en.startswith("A Psalm by David, when he fled from Absalom his son. Yahweh, how")
    assert es.startswith("Salmo de David, cuando huía de delante de Absalom su hijo. ¡Oh Jehová")
    assert "vendado poniéndole medicinas" in rows["Ezekiel 30:21"][1]


def test_chapters_with_hebrew_verse_numbering_in_the_spanish_text_are_dropped(corpus):
    chapters = {chapter(ref) for rows in corpus.values() for ref, _, _ in rows}
    for shifted in ("Numbers 13", "Job 39", "I Samuel 24", "Hosea 12", "Jonah 2"):
        assert shifted not in chapters
    assert {"Genesis 1", "Numbers 12", "Job 38", "Revelation of John 22"} <= chapters


# --- builder functions on synthetic OSIS ----------------------------------------------------


def test_tags_between_letters_become_spaces_and_punctuation_stays_attached():
    fragment = (
        '<w s="1">In</w> <w>beginning</w>, <w>God</w><w>created</w> it.<l eID="a"/> '
        '<l sID="b"/>“<w>Let</w> there be—<w>light</w>,” '
        '<title type="x">Heading</title><speaker>Beloved</speaker>end'
    )
    text = builder.strip_markup(fragment)
    assert text == f"In beginning, God{builder.JOIN_POINT}created it. “Let there be—light,” end"
    verses = builder.resolve_join_points({("Gen", 1, 1): text}, frozenset())
    assert verses[("Gen", 1, 1)] == "In beginning, God created it. “Let there be—light,” end"


def test_a_tag_inside_a_word_or_before_a_clitic_keeps_the_word_whole():
    verses = {
        ("Ezek", 30, 21): f"vendado poniéndo{builder.JOIN_POINT}le medicinas, poniéndole faja",
        ("Gen", 1, 1): f"y dijo{builder.JOIN_POINT}le que sí, y dijole, y dijo",
        ("Gen", 1, 2): f"allí{builder.JOIN_POINT}también, a{builder.JOIN_POINT}la ala a",
    }
    resolved = builder.resolve_join_points(verses, builder.SPANISH_CLITICS)
    assert resolved[("Ezek", 30, 21)] == "vendado poniéndole medicinas, poniéndole faja"
    assert resolved[("Gen", 1, 1)] == "y dijole que sí, y dijole, y dijo"  # clitic "le"
    assert resolved[("Gen", 1, 2)] == "allí también, a la ala a"  # "a" is too short for a verb


def test_a_psalm_title_is_prepended_once_although_diatheke_repeats_it():
    raw = (
        "Psalms 2:12: <w>Blessed</w> are all.\n"
        '<title canonical="true" type="psalm">A Psalm by David.</title> <lg sID="g1"/> '
        '<l level="1" sID="g2"/>Psalms 3:1: <w>Yahweh</w>, how many!\n'
        '<title canonical="true" type="psalm">A Psalm by David.</title> <lg sID="g1"/> '
        '<l level="1" sID="g2"/>Psalms 3:2: Many say.\n'
    )
    verses = builder.parse_verses(raw)
    assert verses == {
        ("Psalms", 2, 12): "Blessed are all.",
        ("Psalms", 3, 1): "A Psalm by David. Yahweh, how many!",
        ("Psalms", 3, 2): "Many say.",
    }


def test_drop_capitals_are_truecased_but_inscriptions_stay_capital():
    casing = builder.preferred_casing(["en el día", "después de", "Jehová dijo"])
    assert builder.truecase_drop_capitals("EN el principio", casing) == "En el principio"
    assert builder.truecase_drop_capitals("Y DESPUÉS movió", casing) == "Y después movió"
    assert builder.truecase_drop_capitals("hijo. ¡OH Jehová", casing) == "hijo. ¡Oh Jehová"
    assert builder.truecase_drop_capitals("SANTIDAD Á JEHOVÁ.", casing) == "SANTIDAD Á JEHOVÁ."


def test_aligner_drops_a_block_of_verses_shifted_by_one_and_keeps_the_rest():
    # A made-up language pair: Spanish word = English word + "o". Verse i uses words 7i + 11j
    # (mod 60), j < 6, so every word recurs ~10 times and verses up to 6 apart share none.
    english = {
        ("Book", 1 + i // 20, 1 + i % 20): " ".join(f"w{(7 * i + 11 * j) % 60}" for j in range(6)) for i in range(100)
    }
    spanish = {ref: " ".join(w + "o" for w in text.split()) for ref, text in english.items()}
    refs = list(english)
    shifted = refs[40:60]  # chapter 3: Spanish text of the next verse under each reference
    for ref, following in zip(shifted, refs[41:61]):
        spanish[ref] = " ".join(w + "o" for w in english[following].split())
    kept, dropped = builder.align(english, spanish, builder.AlignmentCheck(max_verse_share=0.5))
    kept_refs = {ref for ref, _, _ in kept}
    assert not kept_refs & set(shifted)
    assert set(refs[:38]) <= kept_refs and set(refs[62:]) <= kept_refs
    assert dropped["in a shifted chapter"] == 20


def test_chapter_split_is_deterministic_and_never_splits_a_chapter():
    pairs = [((f"B{b}", c, v), "e", "s") for b in range(3) for c in range(1, 30) for v in range(1, 11)]
    first = builder.split_by_chapter(pairs, valid_verses=50, test_verses=50)
    again = builder.split_by_chapter(list(pairs), valid_verses=50, test_verses=50)
    assert first == again
    assert [len(first[s]) for s in ("valid", "test")] == [50, 50]
    owner = {}
    for split, rows in first.items():
        for ref, _, _ in rows:
            assert owner.setdefault(ref[:2], split) == split


# --- a rebuild from the Debian packages -----------------------------------------------------


def sword_modules_installed() -> bool:
    if shutil.which("diatheke") is None:
        return False
    listing = subprocess.run(["diatheke", "-b", "system", "-k", "modulelist"], capture_output=True, text=True).stdout
    return "engWEB2015eb" in listing and "spaRV1909eb" in listing


needs_sword = pytest.mark.skipif(
    not sword_modules_installed(),
    reason="diatheke with sword-text-web and sword-text-sparv is not installed "
    "(apt-get install diatheke sword-text-web sword-text-sparv)",
)


@pytest.fixture(scope="module")
def rebuilt(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("bible")
    builder.main(["--out-dir", str(out)])
    return out


@pytest.fixture(scope="module")
def raw_dumps() -> dict[str, str]:
    return {module: builder.run_diatheke(module, "diatheke") for module in ("engWEB2015eb", "spaRV1909eb")}


@needs_sword
def test_rebuild_from_the_debian_packages_reproduces_the_committed_files_byte_for_byte(rebuilt):
    for name in [f"{s}.tsv.gz" for s in SPLITS] + ["README.md"]:
        assert (rebuilt / name).read_bytes() == (DATA / name).read_bytes(), name


@needs_sword
def test_every_kept_verse_matches_its_reference_in_both_modules(rebuilt, raw_dumps):
    english = builder.parse_verses(raw_dumps["engWEB2015eb"])
    spanish = builder.parse_verses(raw_dumps["spaRV1909eb"])
    assert len(spanish) == 31_102 and len(english) > 31_102  # KJV versification; WEB adds books
    per_book = collections.Counter(ref[0] for ref in spanish)
    assert per_book["Genesis"] == 1533 and per_book["Revelation of John"] == 404
    rows = [row for split in SPLITS for row in read_split(rebuilt, split)]
    by_ref = {builder.format_ref(ref): ref for ref in spanish}
    for ref, en, es in rows:
        key = by_ref[ref]
        assert en.split()[-1] in english[key].replace(builder.JOIN_POINT, " ")
        assert es.split()[0].lower()[:3] in spanish[key].replace(builder.JOIN_POINT, "").lower()


@needs_sword
def test_no_word_is_glued_across_a_removed_tag(rebuilt, raw_dumps):
    """At every tag that sat between two letters in the raw OSIS, the output has a space,
    unless the pieces form a word seen elsewhere and the right one is a Spanish clitic."""
    rows = {ref: (en, es) for split in SPLITS for ref, en, es in read_split(rebuilt, split)}
    glued_clitics = 0
    for column, module in ((0, "engWEB2015eb"), (1, "spaRV1909eb")):
        raw = raw_dumps[module]
        starts = list(builder.VERSE_START.finditer(raw))
        for current, following in zip(starts, starts[1:] + [None]):
            ref = builder.format_ref((current["book"], int(current["chapter"]), int(current["verse"])))
            if ref not in rows:
                continue
            body = raw[current.end() : following.start() if following else len(raw)]
            words = rows[ref][column].split()
            tokens = set(re.findall(r"\w+", rows[ref][column]))
            for site in re.finditer(r"(\w+)(?:<[^>]*>)+(\w+)", body):
                left, right = site.groups()
                if left + right in tokens and f"{left} {right}" not in rows[ref][column]:
                    assert column == 1 and right.lower() in builder.SPANISH_CLITICS, (ref, left, right)
                    glued_clitics += 1
            assert all(len(w) < 40 for w in words), ref
    assert glued_clitics > 20
