"""UA-GEC (Ukrainian GEC corpus, PyPI ``ua-gec``, CC-BY-4.0) -> gold M2, offline.

The corpus ships each document's source sentences and every annotator's corrected sentences,
tokenised and line-aligned. Per source sentence, each annotator's edits are read off a token
alignment of source and correction (``ode_seq.metrics.m2_align``: runs of changed tokens become
one edit typed M/U/R), and ua-gec annotator ``aK`` becomes M2 annotator ``K-1``; an annotator who
changed nothing gets a ``noop`` line. Empty source sentences are skipped. ``m2_to_parallel.py`` then
gives the parallel text, as for any other M2 file.

    python examples/gec/ua_gec_to_m2.py --partition train|test --out OUT.m2
        [--layer gec-only|gec-fluency] [--max-sentences N] [--max-tokens N]

``--max-tokens`` keeps sentences whose source and corrections all have at most N tokens;
``--max-sentences`` keeps the first N sentences (corpus order) that pass.
"""

from __future__ import annotations

import argparse
import sys
from collections import OrderedDict
from typing import Dict, Iterator, List, Sequence, Tuple

from gec_text import write_lines

from ode_seq.metrics.m2_align import align_edits
from ode_seq.metrics.m2_format import format_block

Sentence = Tuple[List[str], Dict[int, List[str]]]  # source tokens, {M2 annotator: corrected tokens}


def corpus_sentences(partition: str, layer: str) -> Iterator[Sentence]:
    """Each source sentence of the partition with all its annotators' corrections, in corpus order."""
    try:
        from ua_gec import Corpus
    except ImportError as error:
        raise SystemExit("ua_gec_to_m2: error: the corpus package is missing: pip install ua-gec==2.1.3") from error
    documents: "OrderedDict[str, list]" = OrderedDict()
    for document in Corpus(partition=partition, annotation_layer=layer):
        documents.setdefault(document.doc_id, []).append(document)
    for doc_id, versions in documents.items():
        sources = versions[0].source_sentences_tokenized
        corrections = {}
        for document in versions:
            targets = document.target_sentences_tokenized
            if len(targets) != len(sources):
                raise SystemExit(
                    f"ua_gec_to_m2: error: document {doc_id} annotator {document.meta.annotator_id} "
                    f"has {len(targets)} sentences for {len(sources)} source sentences"
                )
            corrections[document.meta.annotator_id - 1] = targets
        for index, source in enumerate(sources):
            if source.split():
                yield source.split(), {annotator: lines[index].split() for annotator, lines in corrections.items()}


def m2_blocks(sentences: Iterator[Sentence], max_sentences: int, max_tokens: int) -> Iterator[str]:
    """M2 blocks of the sentences that pass the limits (0 = no limit)."""
    written = 0
    for source, corrections in sentences:
        if max_sentences and written >= max_sentences:
            return
        if max_tokens and max(len(tokens) for tokens in [source, *corrections.values()]) > max_tokens:
            continue
        yield format_block(
            source, {annotator: align_edits(source, target) for annotator, target in sorted(corrections.items())}
        )
        written += 1


def main(argv: Sequence[str] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partition", choices=["train", "test"], required=True)
    parser.add_argument("--out", required=True, help="M2 file to write (via OUT.partial and a rename)")
    parser.add_argument(
        "--layer",
        choices=["gec-only", "gec-fluency"],
        default="gec-only",
        help="gec-only: grammar, spelling and punctuation; gec-fluency: also fluency edits",
    )
    parser.add_argument("--max-sentences", type=int, default=0)
    parser.add_argument("--max-tokens", type=int, default=0)
    args = parser.parse_args(argv)
    blocks = m2_blocks(corpus_sentences(args.partition, args.layer), args.max_sentences, args.max_tokens)
    count = write_lines(args.out, (block + "\n" for block in blocks))
    print(f"{args.out}: {count} sentences from ua-gec {args.partition} ({args.layer})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
