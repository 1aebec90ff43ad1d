"""Read what evaluate.sh wrote into an evaluation directory, for the example scripts' tables.

An evaluation directory holds scores.json (sacreBLEU), generate.log (fairseq-generate's
"Translated N sentences (T tokens) in Xs": decoding time without model loading) and
generate-test.txt (one H- line per translated sentence).
"""

from __future__ import annotations

import json
import os
import re
import sys
from typing import Dict, Union

TRANSLATED = re.compile(r"Translated ([\d,]+) sentences \(([\d,]+) tokens\) in ([\d.]+)s")


def read_text(path: str) -> str:
    """The file's text; exits with a message naming it when it is missing."""
    if not os.path.isfile(path):
        sys.exit(f"error: {path} is missing; run the example script to completion first")
    with open(path, encoding="utf-8") as f:
        return f.read()


def read_evaluation(directory: str, references: int) -> Dict[str, Union[float, int, str]]:
    """sacreBLEU 13a and its signature, decoding seconds and tokens, hypotheses (which must be
    one per reference line: exits otherwise)."""
    scores = json.loads(read_text(os.path.join(directory, "scores.json")))
    log = TRANSLATED.search(read_text(os.path.join(directory, "generate.log")))
    if log is None:
        sys.exit(f"error: {directory}/generate.log has no 'Translated … in Xs' line")
    generated = read_text(os.path.join(directory, "generate-test.txt"))
    hypotheses = len(re.findall(r"^H-\d+\t", generated, re.M))
    if hypotheses != references:
        sys.exit(f"error: {directory} has {hypotheses} hypotheses for {references} references")
    return {
        "bleu": scores["sacrebleu"]["13a"]["score"],
        "signature": scores["sacrebleu"]["13a"]["signature"],
        "seconds": float(log.group(3)),
        "tokens": int(log.group(2).replace(",", "")),
        "hypotheses": hypotheses,
    }
