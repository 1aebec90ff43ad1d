#!/usr/bin/env python3
"""Text helpers of the language-modeling pipeline.

    lm_text.py tokenize [--workers N] < raw > tokenised
    lm_text.py detokenize < tokenised > text
    lm_text.py check-wikitext DIR
    lm_text.py prompts --text FILE --count N --words W > prompts
    lm_text.py with-prompts --prompts FILE < samples > samples
    lm_text.py perplexity LOG --subset DATA_BIN/SUBSET
    lm_text.py verse-scores LOG --subset DATA_BIN/SUBSET > scores   (LOG of --output-word-probs)

Tokenisation: Moses (sacremoses) with its English rules, without punctuation normalisation,
dash splitting or escaping: ``God’s Spirit said, “Let there be light.”`` becomes
``God ’ s Spirit said , “ Let there be light . ”``; fairseq-interactive's ``--tokenizer moses
--moses-no-dash-splits --moses-no-escape`` tokenises the same way. Detokenisation is Moses's,
with an apostrophe between two letters joined back into its word (``God’s``).
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import re
import struct
import sys
from typing import Iterable, Iterator, List, Optional, Sequence

WIKITEXT_FILES = ("wiki.train.tokens", "wiki.valid.tokens", "wiki.test.tokens")
HEADING = re.compile(r"^ = .+ = $")
APOSTROPHE = re.compile(r"(?<=\w) ([’']) (?=\w)")
EVALUATED = re.compile(r"Evaluated ([\d,]+) tokens")
LOSS = re.compile(r"Loss \(base 2\): ([\d.]+), Perplexity: ([\d.]+)")
WORD_PROBS = re.compile(r"fairseq_cli\.eval_lm(?: \| |:)(\d+) (.*)$")  # fairseq's log format, or logging's
WORD_SCORE = re.compile(r"^(.+) \[(-?[\d.]+(?:e-?\d+)?|-?inf)\]$")
EOS = "</s>"
MMAP_INDEX_MAGIC = b"MMIDIDX\x00\x00"  # fairseq's MMapIndexedDataset index
MMAP_INDEX_HEADER = struct.Struct("<9sQBQ")  # magic, version, dtype code, line count
_tokenizer = None


def _tokenize(line: str) -> str:
    global _tokenizer
    if _tokenizer is None:
        from sacremoses import MosesTokenizer

        _tokenizer = MosesTokenizer("en")
    return _tokenizer.tokenize(line, aggressive_dash_splits=False, escape=False, return_str=True)


def tokenize(lines: Iterable[str], workers: int = 1) -> Iterator[str]:
    """Each line Moses-tokenised (see the module docstring), in order."""
    stripped = (line.rstrip("\n") for line in lines)
    if workers == 1:
        yield from map(_tokenize, stripped)
        return
    with multiprocessing.Pool(workers) as pool:
        yield from pool.imap(_tokenize, stripped, chunksize=256)


def detokenize(lines: Iterable[str]) -> Iterator[str]:
    """Moses detokenisation of each line, apostrophes inside words joined."""
    from sacremoses import MosesDetokenizer

    detokenizer = MosesDetokenizer("en")
    for line in lines:
        yield APOSTROPHE.sub(r"\1", detokenizer.detokenize(line.split()))


def wikitext_problems(directory: str) -> List[str]:
    """What keeps DIR's three files from being WikiText-103 (word level, with <unk>): a file
    missing, empty or not UTF-8, a split not starting with a ` = Title = ` heading, or a training
    file without <unk> (the raw version, wikitext-103-raw-v1, has none)."""
    problems = []
    for name in WIKITEXT_FILES:
        path = os.path.join(directory, name)
        if not os.path.isfile(path) or os.path.getsize(path) == 0:
            problems.append(f"{path} is missing or empty")
            continue
        try:
            with open(path, encoding="utf-8") as text:
                first = next((line.rstrip("\n") for line in text if line.strip()), "")
                unknown = name != WIKITEXT_FILES[0] or "<unk>" in first or any("<unk>" in line for line in text)
        except UnicodeDecodeError as error:
            problems.append(f"{path} is not UTF-8 text ({error})")
            continue
        if not HEADING.match(first):
            problems.append(f"{path} does not start with a WikiText heading ' = Title = ', but with {first[:60]!r}")
        elif not unknown:
            problems.append(
                f"{path} holds no <unk>: that is the raw version (wikitext-103-raw-v1); use wikitext-103-v1"
            )
    return problems


def prompts(lines: Sequence[str], count: int, words: int) -> List[str]:
    """The first ``words`` words of ``count`` lines spread evenly over ``lines`` (from the first)."""
    candidates = [line.split() for line in lines if len(line.split()) > words]
    if len(candidates) < count:
        raise ValueError(f"only {len(candidates)} lines have more than {words} words; ask for fewer prompts or words")
    return [" ".join(candidates[i * len(candidates) // count][:words]) for i in range(count)]


def with_prompts(samples: Iterable[str], prompts: Sequence[str]) -> Iterator[str]:
    """Each sample (its prompt's tokens, then the continuation) with the prompt's tokens as given:
    a word the model does not know is <unk> in the sample, not in the prompt."""
    for sample, prompt in zip(samples, prompts, strict=True):
        given = prompt.split()
        yield " ".join(given + sample.split()[len(given) :])


def subset_tokens(prefix: str) -> int:
    """Tokens of the binarised subset PREFIX (``DATA_BIN/test``): every line's words and its
    end-of-line token, the sum of the sizes in its index.

    fairseq-preprocess's default index (``--dataset-impl mmap``) is read here: magic, version
    (<Q, 1), dtype code (<B), line count n (<Q), then n int32 sizes; other formats through fairseq,
    whose import takes seconds."""
    if not (os.path.isfile(f"{prefix}.idx") and os.path.isfile(f"{prefix}.bin")):
        raise ValueError(f"no binarised subset {prefix} (no {prefix}.idx and .bin)")
    with open(f"{prefix}.idx", "rb") as index:
        header = index.read(MMAP_INDEX_HEADER.size)
        if header.startswith(MMAP_INDEX_MAGIC) and len(header) == MMAP_INDEX_HEADER.size:
            _, version, _, lines = MMAP_INDEX_HEADER.unpack(header)
            sizes = index.read(4 * lines)
            if version == 1 and len(sizes) == 4 * lines:
                return sum(struct.unpack(f"<{lines}i", sizes))
    from fairseq.data import data_utils

    dataset = data_utils.load_indexed_dataset(prefix, None)
    if dataset is None:
        raise ValueError(f"{prefix}.idx is in no index format fairseq reads")
    return int(dataset.sizes.sum())


def perplexity_line(log: str, expected_tokens: int) -> str:
    """'perplexity P (L bits per token over N tokens)' from fairseq-eval-lm's log, which must have
    scored every one of the subset's ``expected_tokens`` tokens."""
    evaluated, loss = EVALUATED.search(log), LOSS.search(log)
    if not (evaluated and loss):
        raise ValueError("the log has no 'Evaluated N tokens' and 'Loss (base 2): …, Perplexity: …' lines")
    tokens = int(evaluated.group(1).replace(",", ""))
    if tokens != expected_tokens:
        raise ValueError(
            f"fairseq-eval-lm scored {tokens} tokens, but the subset holds {expected_tokens}: "
            "a perplexity over part of the text is not the subset's"
        )
    return f"perplexity {float(loss.group(2)):.2f} ({float(loss.group(1)):.4f} bits per token over {tokens} tokens)"


def verse_scores(log: str, expected_tokens: int) -> List[str]:
    """Per line of the scored subset, 'LOG-LIKELIHOOD<TAB>TOKENS' (natural log, summed over the
    line's words and its end-of-line token) from the word scores fairseq-eval-lm logs with
    --output-word-probs: its blocks in sample-id order, cut after every end-of-line token."""
    blocks = {}
    for line in log.splitlines():
        match = WORD_PROBS.search(line)
        if match:
            blocks[int(match.group(1))] = match.group(2).split("\t")
    scores, verse, tokens = [], 0.0, 0
    for block in (blocks[i] for i in sorted(blocks)):
        for word in block:
            parsed = WORD_SCORE.match(word)
            if parsed is None:
                raise ValueError(f"cannot read the word score '{word}' (run fairseq-eval-lm with --output-word-probs)")
            verse += float(parsed.group(2))
            tokens += 1
            if parsed.group(1) == EOS:
                scores.append(f"{verse!r}\t{tokens}")
                verse, tokens = 0.0, 0
    scored = sum(int(score.split("\t")[1]) for score in scores) + tokens
    if tokens or scored != expected_tokens:
        raise ValueError(
            f"the log scores {scored} tokens in {len(scores)} complete lines, but the subset holds "
            f"{expected_tokens} tokens: run fairseq-eval-lm with --output-word-probs over the whole subset"
        )
    return scores


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    tokenizing = commands.add_parser("tokenize", help="Moses-tokenise stdin to stdout")
    tokenizing.add_argument("--workers", type=int, default=1)
    commands.add_parser("detokenize", help="detokenise stdin to stdout")
    checking = commands.add_parser("check-wikitext", help="check DIR's wiki.{train,valid,test}.tokens")
    checking.add_argument("directory")
    prompting = commands.add_parser("prompts", help="prompts: the first words of lines spread over a file")
    prompting.add_argument("--text", required=True)
    prompting.add_argument("--count", type=int, required=True)
    prompting.add_argument("--words", type=int, required=True)
    restoring = commands.add_parser("with-prompts", help="samples of stdin with their prompts' tokens as given")
    restoring.add_argument("--prompts", required=True)
    scoring = commands.add_parser("perplexity", help="the perplexity line of a fairseq-eval-lm log")
    scoring.add_argument("log")
    scoring.add_argument("--subset", required=True, help="the scored binarised subset, DATA_BIN/SUBSET")
    verses = commands.add_parser("verse-scores", help="per line, its log-likelihood and tokens, from a log")
    verses.add_argument("log")
    verses.add_argument("--subset", required=True, help="the scored binarised subset, DATA_BIN/SUBSET")
    args = parser.parse_args(argv)

    if args.command in ("tokenize", "detokenize"):
        lines = tokenize(sys.stdin, args.workers) if args.command == "tokenize" else detokenize(sys.stdin)
        for line in lines:
            print(line)
        return 0
    try:
        if args.command == "check-wikitext":
            problems = wikitext_problems(args.directory)
            for problem in problems:
                print(f"error: {problem}", file=sys.stderr)
            return 1 if problems else 0
        if args.command == "prompts":
            with open(args.text, encoding="utf-8") as text:
                print("\n".join(prompts(text.read().splitlines(), args.count, args.words)))
            return 0
        if args.command == "with-prompts":
            with open(args.prompts, encoding="utf-8") as given:
                print("\n".join(with_prompts(sys.stdin.read().splitlines(), given.read().splitlines())))
            return 0
        with open(args.log, encoding="utf-8") as log:
            text = log.read()
        if args.command == "verse-scores":
            print("\n".join(verse_scores(text, subset_tokens(args.subset))))
        else:
            print(perplexity_line(text, subset_tokens(args.subset)))
        return 0
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
