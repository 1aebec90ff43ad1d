#!/usr/bin/env python3
"""Checks and filters for parallel text files, used by the prepare scripts.

parallel_text.py check PREFIX SRC TGT [--allow-empty]
    PREFIX.SRC and PREFIX.TGT exist, are UTF-8 text (ode_seq.text_files: a byte-order mark and
    CRLF line ends are read as the clean file) and have the same number of lines; unless
    --allow-empty, no line is empty. Exit 1 with a message naming file, line and fix.
parallel_text.py clean IN_PREFIX OUT_PREFIX SRC TGT [--min-len 1] [--max-len 250] [--ratio 1.5]
    Keep the pairs whose token counts n_s, n_t satisfy min ≤ n ≤ max on both sides and
    max(n_s, n_t) ≤ ratio · min(n_s, n_t) (Moses clean-corpus-n.perl); writes OUT_PREFIX.*
    atomically and prints how many pairs were kept.
parallel_text.py sgm FILE
    Print the segments of a WMT SGML file, one per line, exactly as sacreBLEU extracts its
    references: the text of each `<seg …>` line, whitespace collapsed.
"""

from __future__ import annotations

import argparse
import itertools
import os
import re
import sys
import tempfile
from pathlib import Path
from typing import Iterator, Sequence

from ode_seq.text_files import TextInputError, iter_lines

SEGMENT = re.compile(r"<seg.*?>(.*)</seg>.*?")


class ParallelTextError(ValueError):
    """Input that cannot be used; the message names the file, the line and the fix."""


def read_lines(path: Path) -> Iterator[str]:
    """Stream the lines of a text file as `ode_seq.text_files` reads them (TextInputError names
    file, line and byte of anything it refuses)."""
    if not path.is_file():
        raise ParallelTextError(f"{path} does not exist")
    with open(path, "rb") as handle:
        yield from iter_lines(handle, str(path))


def read_pairs(prefix: str, src: str, tgt: str, allow_empty: bool) -> Iterator[tuple[str, str]]:
    """Stream the line pairs of PREFIX.SRC / PREFIX.TGT, validated (see the module docstring)."""
    paths = [Path(f"{prefix}.{lang}") for lang in (src, tgt)]
    streams = [read_lines(p) for p in paths]
    count = 0
    for count, pair in enumerate(itertools.zip_longest(*streams), 1):
        if None in pair:
            longer, shorter = (paths[0], paths[1]) if pair[1] is None else (paths[1], paths[0])
            raise ParallelTextError(
                f"{shorter} ends at line {count - 1} but {longer} goes on; the files must have the same number of lines"
            )
        if not allow_empty:
            for path, line in zip(paths, pair):
                if not line.strip():
                    raise ParallelTextError(f"{path} line {count} is empty; remove the pair from both files")
        yield pair
    if count == 0:
        raise ParallelTextError(f"{paths[0]} and {paths[1]} are empty")


def keep_pair(source: str, target: str, min_len: int, max_len: int, ratio: float) -> bool:
    """Moses clean-corpus-n: both lengths within [min_len, max_len] and their ratio ≤ ratio."""
    n_source, n_target = len(source.split()), len(target.split())
    if not (min_len <= n_source <= max_len and min_len <= n_target <= max_len):
        return False
    return max(n_source, n_target) <= ratio * min(n_source, n_target)


def _temporary_beside(path: Path) -> Path:
    handle, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    os.close(handle)
    os.chmod(name, 0o644)
    return Path(name)


def clean(
    in_prefix: str, out_prefix: str, src: str, tgt: str, min_len: int, max_len: int, ratio: float
) -> tuple[int, int]:
    """Filter a parallel corpus (empty lines are allowed and removed); returns (kept, total).

    Both outputs are written to temporary files and renamed only when every input line was read,
    so an error leaves no partial OUT_PREFIX files.
    """
    outputs = [Path(f"{out_prefix}.{lang}") for lang in (src, tgt)]
    outputs[0].parent.mkdir(parents=True, exist_ok=True)
    temporaries = [_temporary_beside(p) for p in outputs]
    kept = total = 0
    try:
        with (
            open(temporaries[0], "w", encoding="utf-8") as out_src,
            open(temporaries[1], "w", encoding="utf-8") as out_tgt,
        ):
            for total, (source, target) in enumerate(read_pairs(in_prefix, src, tgt, True), 1):
                if keep_pair(source, target, min_len, max_len, ratio):
                    out_src.write(source + "\n")
                    out_tgt.write(target + "\n")
                    kept += 1
        if kept == 0:
            raise ParallelTextError(f"no pair of {in_prefix}.{{{src},{tgt}}} passes the length filter")
        for tmp, final in zip(temporaries, outputs):
            os.replace(tmp, final)
    finally:
        for tmp in temporaries:
            tmp.unlink(missing_ok=True)
    return kept, total


def sgm_segments(path: Path) -> Iterator[str]:
    """Segments of a WMT SGML file, extracted the way sacreBLEU does."""
    for line in read_lines(path):
        if line.startswith("<seg "):
            yield " ".join(SEGMENT.sub(r"\1", line).split())


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    check_parser = commands.add_parser("check")
    check_parser.add_argument("prefix")
    check_parser.add_argument("src")
    check_parser.add_argument("tgt")
    check_parser.add_argument("--allow-empty", action="store_true")
    clean_parser = commands.add_parser("clean")
    for name in ("in_prefix", "out_prefix", "src", "tgt"):
        clean_parser.add_argument(name)
    clean_parser.add_argument("--min-len", type=int, default=1)
    clean_parser.add_argument("--max-len", type=int, default=250)
    clean_parser.add_argument("--ratio", type=float, default=1.5)
    sgm_parser = commands.add_parser("sgm")
    sgm_parser.add_argument("file", type=Path)
    args = parser.parse_args(argv)
    try:
        if args.command == "check":
            count = sum(1 for _ in read_pairs(args.prefix, args.src, args.tgt, args.allow_empty))
            print(f"{args.prefix}.{{{args.src},{args.tgt}}}: {count} line pairs")
        elif args.command == "clean":
            kept, total = clean(
                args.in_prefix, args.out_prefix, args.src, args.tgt, args.min_len, args.max_len, args.ratio
            )
            print(f"kept {kept} of {total} pairs ({args.min_len}..{args.max_len} tokens, ratio ≤ {args.ratio})")
        else:
            segments = list(sgm_segments(args.file))
            if not segments:
                raise ParallelTextError(f"{args.file} holds no <seg> lines; is it a WMT .sgm file?")
            sys.stdout.write("".join(s + "\n" for s in segments))
    except (ParallelTextError, TextInputError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
