"""Lang-8 style parallel text -> tokenised, filtered parallel text.

Pairs are line-aligned ``SRC``/``TGT`` files. With ``--tokenize nltk`` both sides get the CoNLL
NLTK word tokenisation (see ``gec_text.py``); ``none`` keeps the text (already tokenised). Then a
pair is dropped when a side has fewer than ``--min-len`` or more than ``--max-len`` tokens (0 = no
limit), when ``--max-ratio`` > 0 and the longer side has more than that many times the tokens of the
shorter, or, with ``--drop-copies``, when source and target are identical.

    python examples/gec/parallel_text.py --src lang8.src --tgt lang8.tgt --out-prefix OUT \
        [--tokenize nltk|none] [--min-len 1] [--max-len 0] [--max-ratio 0] [--drop-copies] [--workers 1]

writes ``OUT.src`` and ``OUT.tgt`` (each via ``.partial`` and a rename) and prints the counts.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from multiprocessing import Pool
from typing import Iterable, Iterator, List, Optional, Sequence, Tuple

from gec_text import tokenize_lines, write_lines

from ode_seq.text_files import read_lines


def drop_reason(
    source: str, target: str, min_len: int, max_len: int, max_ratio: float, drop_copies: bool
) -> Optional[str]:
    """Why a tokenised pair is filtered out, or None to keep it."""
    lengths = (len(source.split()), len(target.split()))
    if min(lengths) < min_len:
        return "too short"
    if max_len and max(lengths) > max_len:
        return "too long"
    if max_ratio and max(lengths) > max_ratio * max(min(lengths), 1):
        return "length ratio"
    if drop_copies and source == target:
        return "copy"
    return None


def tokenized(lines: List[str], workers: int, chunk: int = 2000) -> List[str]:
    """NLTK-tokenised lines, in order, on ``workers`` processes."""
    chunks = [lines[i : i + chunk] for i in range(0, len(lines), chunk)]
    if workers <= 1:
        return [line for part in chunks for line in tokenize_lines(part)]
    with Pool(workers) as pool:
        return [line for part in pool.imap(tokenize_lines, chunks) for line in part]


def filtered(pairs: Iterable[Tuple[str, str]], counts: Counter, **limits) -> Iterator[Tuple[str, str]]:
    for source, target in pairs:
        reason = drop_reason(source, target, **limits)
        counts[reason or "kept"] += 1
        if reason is None:
            yield source, target


def main(argv: Sequence[str] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--src", required=True)
    parser.add_argument("--tgt", required=True)
    parser.add_argument("--out-prefix", required=True, help="writes OUT_PREFIX.src and OUT_PREFIX.tgt")
    parser.add_argument("--tokenize", choices=["nltk", "none"], default="nltk")
    parser.add_argument("--min-len", type=int, default=1, help="fewest tokens per side")
    parser.add_argument("--max-len", type=int, default=0, help="most tokens per side (0: no limit)")
    parser.add_argument("--max-ratio", type=float, default=0.0, help="most longer/shorter length ratio (0: off)")
    parser.add_argument("--drop-copies", action="store_true", help="drop pairs whose target equals the source")
    parser.add_argument("--workers", type=int, default=1)
    args = parser.parse_args(argv)
    try:
        sources, targets = read_lines(args.src), read_lines(args.tgt)
    except (OSError, ValueError) as error:
        print(f"parallel_text: error: {error}", file=sys.stderr)
        return 1
    if len(sources) != len(targets):
        print(
            f"parallel_text: error: {args.src} has {len(sources)} lines but {args.tgt} has {len(targets)}: "
            f"the files must be line-aligned",
            file=sys.stderr,
        )
        return 1
    if args.tokenize == "nltk":
        sources, targets = tokenized(sources, args.workers), tokenized(targets, args.workers)
    else:
        sources, targets = [" ".join(s.split()) for s in sources], [" ".join(t.split()) for t in targets]
    counts: Counter = Counter()
    kept = list(
        filtered(
            zip(sources, targets),
            counts,
            min_len=args.min_len,
            max_len=args.max_len,
            max_ratio=args.max_ratio,
            drop_copies=args.drop_copies,
        )
    )
    write_lines(args.out_prefix + ".src", (source for source, _ in kept))
    write_lines(args.out_prefix + ".tgt", (target for _, target in kept))
    print(
        f"{args.src}: {len(sources)} pairs, " + ", ".join(f"{name} {n}" for name, n in sorted(counts.items())),
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
