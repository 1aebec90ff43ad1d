"""Serving speed on CPU: CTranslate2 against fairseq-generate, same model, sentences, beam, length
penalty, batch size and threads (one each), measured back to back in one run.

    OMP_NUM_THREADS=1 python benchmarks/serving_speed.py --checkpoint CKPT --data-bin DIR \
        --source-lang en --target-lang es --work DIR [--sentences 500 --beam 4 --lenpen 0.6 --batch-size 32 --rounds 3]

The checkpoint (an Euler ODE Transformer, or any model `python -m ode_seq.cli.export` takes) is
exported to a plain fairseq checkpoint and to CTranslate2 under --work; the first --sentences
sentences of the test split are binarised there. Rows: fairseq-generate on the checkpoint with the
plugin, fairseq-generate on the plain export without it, CTranslate2 (``translate_batch``). The
time of each is its decoding loop (fairseq's own "Translated ... in Xs"; CTranslate2's
``translate_batch`` call), model loading excluded; each decoder runs --rounds times, interleaved.
Prints a Markdown table (median speed, median and range of the per-round ratio to plain
fairseq-generate) and how many hypotheses CTranslate2 and fairseq-generate share.
"""

import argparse
import os
import re
import statistics
import subprocess
import sys
import time
from typing import Dict, List, Tuple

BIN = os.path.dirname(sys.executable)
ROWS = (
    "fairseq-generate, ODE checkpoint with the plugin",
    "fairseq-generate, plain export without the plugin",
    "CTranslate2 4.8.5 (float32)",
)
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def tool(name: str, *args: str) -> str:
    exe = sys.executable if name == "python" else os.path.join(BIN, name)
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    done = subprocess.run([exe, *args], capture_output=True, text=True, cwd=ROOT, env=env)
    if done.returncode != 0:
        sys.exit(f"{name} {' '.join(args)} failed:\n{done.stderr[-3000:]}")
    return done.stdout + done.stderr


def test_subset(data_bin: str, src: str, tgt: str, n: int, work: str) -> List[str]:
    """Binarise the first ``n`` test sentences into ``work``/bin; returns their source tokens."""
    from fairseq.data import Dictionary, data_utils

    lines = {}
    for lang in (src, tgt):
        dictionary = Dictionary.load(os.path.join(data_bin, f"dict.{lang}.txt"))
        dataset = data_utils.load_indexed_dataset(os.path.join(data_bin, f"test.{src}-{tgt}.{lang}"), dictionary)
        lines[lang] = [dictionary.string(dataset[i]) for i in range(min(n, len(dataset)))]
        with open(os.path.join(work, f"bench.{lang}"), "w", encoding="utf-8") as f:
            f.write("".join(line + "\n" for line in lines[lang]))
    if not os.path.exists(os.path.join(work, "bin")):
        tool(
            "fairseq-preprocess",
            "--source-lang",
            src,
            "--target-lang",
            tgt,
            "--testpref",
            os.path.join(work, "bench"),
            "--srcdict",
            os.path.join(data_bin, f"dict.{src}.txt"),
            "--tgtdict",
            os.path.join(data_bin, f"dict.{tgt}.txt"),
            "--destdir",
            os.path.join(work, "bin"),
            "--workers",
            "1",
        )
    return lines[src]


def fairseq_generate(work: str, path: str, args, plugin: bool) -> Tuple[float, Dict[int, str]]:
    """(sentences per second of the decoding loop, {id: hypothesis})."""
    extra = ["--user-dir", os.path.join(ROOT, "user_dir")] if plugin else ["--required-batch-size-multiple", "1"]
    out = tool(
        "fairseq-generate",
        os.path.join(work, "bin"),
        "--path",
        path,
        "--gen-subset",
        "test",
        "--beam",
        str(args.beam),
        "--lenpen",
        str(args.lenpen),
        "--batch-size",
        str(args.batch_size),
        "--source-lang",
        args.source_lang,
        "--target-lang",
        args.target_lang,
        *extra,
    )
    speed = re.search(r"Translated ([\d,]+) sentences .* in ([\d.]+)s \(([\d.]+) sentences/s", out)
    hypotheses = {int(i): h for i, h in re.findall(r"^H-(\d+)\t\S+\t(.*)$", out, re.M)}
    return float(speed.group(3)), hypotheses


def ctranslate2_speed(model_dir: str, sources: List[str], args) -> Tuple[float, List[str]]:
    import ctranslate2

    translator = ctranslate2.Translator(model_dir, device="cpu", inter_threads=1, intra_threads=1)
    tokens = [s.split() for s in sources]
    start = time.perf_counter()
    results = translator.translate_batch(
        tokens, beam_size=args.beam, length_penalty=args.lenpen, max_batch_size=args.batch_size, max_decoding_length=200
    )
    seconds = time.perf_counter() - start
    return len(sources) / seconds, [" ".join(r.hypotheses[0]) for r in results]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--data-bin", required=True)
    p.add_argument("--source-lang", required=True)
    p.add_argument("--target-lang", required=True)
    p.add_argument("--work", required=True, help="directory for the exports and the binarised subset")
    p.add_argument("--sentences", type=int, default=500)
    p.add_argument("--beam", type=int, default=4)
    p.add_argument("--lenpen", type=float, default=0.6)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--rounds", type=int, default=3, help="runs of each decoder, interleaved")
    args = p.parse_args()
    os.makedirs(args.work, exist_ok=True)
    plain, ct2 = os.path.join(args.work, "plain.pt"), os.path.join(args.work, "ct2")
    if not os.path.exists(plain):
        tool(
            "python", "-m", "ode_seq.cli.export", "--path", args.checkpoint, "--data", args.data_bin, "--output", plain
        )
    if not os.path.exists(ct2):
        tool(
            "python",
            "-m",
            "ode_seq.cli.export",
            "--to",
            "ctranslate2",
            "--path",
            args.checkpoint,
            "--data",
            args.data_bin,
            "--output",
            ct2,
        )
    sources = test_subset(args.data_bin, args.source_lang, args.target_lang, args.sentences, args.work)
    rows = {name: [] for name in ROWS}
    for _ in range(args.rounds):  # the decoders interleaved, so that load changes hit all of them
        rows[ROWS[0]].append(fairseq_generate(args.work, args.checkpoint, args, plugin=True)[0])
        speed, hypotheses = fairseq_generate(args.work, plain, args, plugin=False)
        rows[ROWS[1]].append(speed)
        speed, ct2_hypotheses = ctranslate2_speed(ct2, sources, args)
        rows[ROWS[2]].append(speed)
    differ = [i for i, h in enumerate(ct2_hypotheses) if hypotheses.get(i) != h]
    capped = [i for i in differ if max(len(hypotheses.get(i, "").split()), len(ct2_hypotheses[i].split())) >= 200]
    print(
        f"| decoder | sentences/s, median of {args.rounds} rounds (n = {len(sources)}, beam {args.beam}, "
        f"lenpen {args.lenpen}, batch {args.batch_size}, 1 thread) | × fairseq-generate (per-round range) |"
    )
    print("|---|---:|---:|")
    reference = rows[ROWS[1]]
    for name, speeds in rows.items():
        ratios = [s / r for s, r in zip(speeds, reference)]
        print(
            f"| {name} | {statistics.median(speeds):.1f} | {statistics.median(ratios):.2f} "
            f"({min(ratios):.2f}–{max(ratios):.2f}) |"
        )
    print(
        f"\nCTranslate2's hypothesis equals fairseq-generate's for {len(sources) - len(differ)} of "
        f"{len(sources)} sentences; of the {len(differ)} others, {len(capped)} reach the 200-token cap"
    )


if __name__ == "__main__":
    main()
