"""Extract CNN/DailyMail into aligned ``{train,valid,test}.{source,target,ids}`` text files.

``stories``: the standard split. Each line of ``url_lists/all_{train,val,test}.txt`` is a URL; its
story is ``sha1(url).hexdigest() + ".story"``, looked up in the ``--stories`` directories
(``cnn/stories``, ``dailymail/stories``). A missing story is an error unless
``--on-missing skip``, which counts and reports it.

``table``: ``{train,validation,test}.{csv,jsonl}`` (``val``/``valid`` also accepted) with columns
``article`` and ``highlights`` (highlights one per line), optionally ``id``.

Every example is written to source, target and ids together, or not at all; examples with no
highlights or an empty article are skipped, counted, and reported on stderr and in
``extract_report.json``. The output directory is built as ``OUT.partial`` and renamed when complete.
"""

import argparse
import csv
import hashlib
import json
import os
import shutil
import sys
from collections import Counter
from typing import Dict, Iterator, List, Sequence, Tuple

from cnndm_text import Example, example_from_record, example_from_story

from ode_seq.text_files import TextInputError, read_lines

SPLITS = ("train", "valid", "test")
URL_LIST_NAMES = {"train": "all_train.txt", "valid": "all_val.txt", "test": "all_test.txt"}
TABLE_STEMS = {"train": ("train",), "valid": ("validation", "val", "valid"), "test": ("test",)}
URL_LISTS_HINT = (
    "get url_lists/ (all_train.txt, all_val.txt, all_test.txt) from https://github.com/abisee/cnn-dailymail"
)


class PreparationError(Exception):
    """Bad input: the message names the problem and how to fix it."""


def story_name(url: str) -> str:
    """The story file of a URL: hex SHA-1 of its UTF-8 bytes plus ``.story``."""
    return hashlib.sha1(url.encode("utf-8")).hexdigest() + ".story"


def read_url_list(path: str) -> List[str]:
    if not os.path.isfile(path):
        raise PreparationError(f"URL list not found: {path}; {URL_LISTS_HINT} and pass --url-lists DIR")
    return [line.strip() for line in read_text_lines(path) if line.strip()]


def index_stories(directories: Sequence[str]) -> Dict[str, str]:
    """Map story file name to its path; earlier directories win."""
    index: Dict[str, str] = {}
    for directory in directories:
        if not os.path.isdir(directory):
            raise PreparationError(
                f"stories directory not found: {directory}; pass the unpacked cnn/stories or dailymail/stories"
            )
        for name in os.listdir(directory):
            if name.endswith(".story"):
                index.setdefault(name, os.path.join(directory, name))
    return index


def read_text_lines(path: str) -> List[str]:
    """The lines of a text file as `ode_seq.text_files` reads them; PreparationError naming file,
    line and byte for anything it refuses."""
    try:
        return read_lines(path)
    except TextInputError as error:
        raise PreparationError(str(error)) from None


def read_story(path: str) -> str:
    return "\n".join(read_text_lines(path))


def story_examples(
    urls: List[str], stories: Dict[str, str], on_missing: str, keep_bylines: bool, split: str
) -> Iterator[Tuple[str, Example]]:
    """(story id, example) for each URL; a missing story raises or yields a skip."""
    missing = [url for url in urls if story_name(url) not in stories]
    if missing and on_missing == "error":
        raise PreparationError(
            f"{len(missing)} of {len(urls)} {split} stories are missing, e.g. {story_name(missing[0])} "
            f"for {missing[0]}; pass every stories directory with --stories, "
            "or --on-missing skip to count and skip them"
        )
    for url in urls:
        name = story_name(url)
        if name not in stories:
            yield name[: -len(".story")], Example("", "", "missing story")
            continue
        yield name[: -len(".story")], example_from_story(read_story(stories[name]), keep_bylines)


def find_table(input_dir: str, split: str) -> str:
    candidates = [os.path.join(input_dir, f"{stem}.{ext}") for stem in TABLE_STEMS[split] for ext in ("csv", "jsonl")]
    found = [path for path in candidates if os.path.isfile(path)]
    if len(found) != 1:
        problem = "no" if not found else "more than one"
        raise PreparationError(
            f"{problem} {split} table in {input_dir}: "
            f"expected exactly one of {', '.join(map(os.path.basename, candidates))}"
        )
    return found[0]


def read_records(path: str) -> Iterator[Dict[str, str]]:
    if path.endswith(".csv"):
        csv.field_size_limit(sys.maxsize)
        yield from csv.DictReader(line + "\n" for line in read_text_lines(path))
        return
    for number, line in enumerate(read_text_lines(path), 1):
        if line.strip():
            try:
                yield json.loads(line)
            except json.JSONDecodeError as error:
                raise PreparationError(f"{path}:{number}: not a JSON object ({error})") from error


def table_examples(path: str, keep_bylines: bool) -> Iterator[Tuple[str, Example]]:
    for number, record in enumerate(read_records(path), 1):
        if "article" not in record or "highlights" not in record:
            raise PreparationError(
                f"{path}: record {number} lacks an 'article' or 'highlights' field (has {sorted(record)})"
            )
        example_id = str(record.get("id") or number)
        yield example_id, example_from_record(record["article"] or "", record["highlights"] or "", keep_bylines)


def write_split(examples: Iterator[Tuple[str, Example]], out_dir: str, split: str) -> Counter:
    """Write aligned source/target/ids lines; return counts of written and skipped examples."""
    counts: Counter = Counter()
    paths = [os.path.join(out_dir, f"{split}.{suffix}") for suffix in ("source", "target", "ids")]
    handles = [open(path, "w", encoding="utf-8", newline="\n") for path in paths]
    try:
        for example_id, example in examples:
            if example.skip_reason:
                counts[f"skipped: {example.skip_reason}"] += 1
                continue
            for handle, text in zip(handles, (example.article, example.summary, example_id)):
                handle.write(text + "\n")
            counts["written"] += 1
    finally:
        for handle in handles:
            handle.close()
    return counts


def extract(args: argparse.Namespace) -> Dict[str, Dict[str, int]]:
    """Write every split into ``OUT.partial``, then rename it to ``OUT``; return the counts."""
    if os.path.exists(args.out_dir):
        raise PreparationError(f"output directory exists: {args.out_dir}; remove it to extract again")
    if args.source == "stories":
        url_lists = {split: read_url_list(os.path.join(args.url_lists, URL_LIST_NAMES[split])) for split in SPLITS}
        stories = index_stories(args.stories)
        sources = {
            split: story_examples(url_lists[split], stories, args.on_missing, args.keep_bylines, split)
            for split in SPLITS
        }
    else:
        sources = {split: table_examples(find_table(args.input_dir, split), args.keep_bylines) for split in SPLITS}
    partial = args.out_dir + ".partial"
    shutil.rmtree(partial, ignore_errors=True)
    os.makedirs(partial)
    try:
        report = {split: dict(write_split(sources[split], partial, split)) for split in SPLITS}
        for split, counts in report.items():
            if not counts.get("written"):
                raise PreparationError(f"no usable {split} examples ({counts}); check the input files")
        with open(os.path.join(partial, "extract_report.json"), "w", encoding="utf-8") as handle:
            json.dump(report, handle, indent=2)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    os.rename(partial, args.out_dir)
    return report


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="source", required=True)
    stories = commands.add_parser("stories", help="raw .story files and the standard URL lists")
    stories.add_argument("--stories", nargs="+", required=True, help="cnn/stories and dailymail/stories directories")
    stories.add_argument("--url-lists", required=True, help="directory with all_train.txt, all_val.txt, all_test.txt")
    stories.add_argument("--on-missing", choices=("error", "skip"), default="error")
    table = commands.add_parser("table", help="article/highlights CSV or JSONL files")
    table.add_argument("--input-dir", required=True)
    for command in (stories, table):
        command.add_argument("--out-dir", required=True)
        command.add_argument("--keep-bylines", action="store_true", help="keep CNN datelines and Daily Mail headers")
    return parser.parse_args(argv)


def main(argv: Sequence[str]) -> int:
    args = parse_args(argv)
    try:
        report = extract(args)
    except PreparationError as error:
        print(f"cnndm_extract: error: {error}", file=sys.stderr)
        return 2
    for split, counts in report.items():
        details = ", ".join(f"{key} {value}" for key, value in sorted(counts.items()))
        print(f"cnndm_extract: {split}: {details}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
