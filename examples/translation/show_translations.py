#!/usr/bin/env python3
"""Print a few test sentences with their reference and the model's (detokenised) translation.

    show_translations.py --generated generate-test.txt --source test.en --reference test.es \
        --lang es [--count 3] [--min-words 8] [--max-words 20]

The sentences shown are spread evenly over those whose source has between ``--min-words`` and
``--max-words`` words, so the same test set always shows the same sentences. Hypotheses are the
``H-`` lines of fairseq-generate (subwords removed, Moses tokens kept), detokenised for reading.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Dict, List

from sacremoses import MosesDetokenizer

from ode_seq.text_files import read_lines


def hypotheses(generated: Path) -> Dict[int, str]:
    """Sentence id → best hypothesis (tokenised) from fairseq-generate's output."""
    best: Dict[int, str] = {}
    for line in read_lines(generated):
        if line.startswith("H-"):
            sid, _, text = line.split("\t", 2)
            best.setdefault(int(sid[2:]), text)
    return best


def chosen(sources: List[str], count: int, min_words: int, max_words: int) -> List[int]:
    candidates = [i for i, s in enumerate(sources) if min_words <= len(s.split()) <= max_words]
    if len(candidates) <= count or count < 2:
        return candidates[:count]
    step = (len(candidates) - 1) / (count - 1)
    return [candidates[round(k * step)] for k in range(count)]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--generated", type=Path, required=True)
    parser.add_argument("--source", type=Path, required=True)
    parser.add_argument("--reference", type=Path, required=True)
    parser.add_argument("--lang", required=True, help="target language (Moses detokenisation)")
    parser.add_argument("--count", type=int, default=3)
    parser.add_argument("--min-words", type=int, default=8)
    parser.add_argument("--max-words", type=int, default=20)
    args = parser.parse_args(argv)
    sources, references = read_lines(args.source), read_lines(args.reference)
    found = hypotheses(args.generated)
    detokenize = MosesDetokenizer(lang=args.lang).detokenize
    for i in chosen(sources, args.count, args.min_words, args.max_words):
        if i not in found:
            print(f"error: {args.generated} has no hypothesis for sentence {i}", file=sys.stderr)
            return 1
        print(f"  source:      {sources[i]}")
        print(f"  reference:   {references[i]}")
        print(f"  translation: {detokenize(found[i].split())}")
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
