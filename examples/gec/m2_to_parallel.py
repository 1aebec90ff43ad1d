"""M2 files -> parallel source/target text (tokenised as in the M2 file).

The target applies one annotator's edits (``--annotator``, default 0) with each edit's first
correction, in every sentence: a sentence that annotator left without edits (``noop``, or no A
lines at all) is copied unchanged. An edit that overlaps one already applied is skipped and
counted. An annotator id that appears nowhere in a file is an error.

    python examples/gec/m2_to_parallel.py NUCLE.m2 [MORE.m2 …] --out-prefix OUT [--annotator 0]

writes ``OUT.src`` and ``OUT.tgt`` (each via ``.partial`` and a rename).
"""

from __future__ import annotations

import argparse
import sys
from typing import List, Sequence, Tuple

from gec_text import write_lines

from ode_seq.metrics.m2_format import M2FormatError, apply_edits, check_annotator, read_m2


def m2_to_pairs(path: str, annotator: int) -> Tuple[List[Tuple[str, str]], int]:
    """(source, target) lines of one M2 file and the number of overlapping edits skipped."""
    sentences = read_m2(path)
    check_annotator(sentences, annotator, path)
    pairs, skipped = [], 0
    for sentence in sentences:
        target, overlapping = apply_edits(sentence.source, sentence.edits_of(annotator))
        pairs.append((" ".join(sentence.source), " ".join(target)))
        skipped += overlapping
    return pairs, skipped


def main(argv: Sequence[str] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("m2_files", nargs="+", help="M2 files, converted in order")
    parser.add_argument("--out-prefix", required=True, help="writes OUT_PREFIX.src and OUT_PREFIX.tgt")
    parser.add_argument("--annotator", type=int, default=0, help="whose corrections make the target")
    args = parser.parse_args(argv)
    pairs: List[Tuple[str, str]] = []
    try:
        for path in args.m2_files:
            file_pairs, skipped = m2_to_pairs(path, args.annotator)
            changed = sum(source != target for source, target in file_pairs)
            print(
                f"{path}: {len(file_pairs)} sentences, {changed} corrected by annotator {args.annotator}, "
                f"{skipped} overlapping edits skipped",
                file=sys.stderr,
            )
            pairs += file_pairs
    except (OSError, ValueError, M2FormatError) as error:
        print(f"m2_to_parallel: error: {error}", file=sys.stderr)
        return 1
    write_lines(args.out_prefix + ".src", (source for source, _ in pairs))
    write_lines(args.out_prefix + ".tgt", (target for _, target in pairs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
