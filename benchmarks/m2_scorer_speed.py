"""Time the M2 scorer on a synthetic test set the size of CoNLL-2014 (1,312 sentences, ~23 tokens,
two annotators, system outputs with 0–3 token edits against gold edits of 0–4).

    python -m benchmarks.m2_scorer_speed [--sentences 1312] [--seed 0]

Prints the wall and CPU time and P/R/F0.5; the number is machine-dependent, so no test asserts it.
"""

import argparse
import random
import time
from typing import List, Tuple

from ode_seq.metrics.m2 import M2Scorer
from ode_seq.metrics.m2_align import align_edits
from ode_seq.metrics.m2_format import format_block, parse_m2

FUNCTION_WORDS = ["the", "a", "of", "to", "in", "is", "are", "and", ",", ".", "that", "it", "for"]


def synthetic_corpus(sentences: int, seed: int) -> Tuple[List[str], List[str]]:
    """M2 lines and hypotheses: gold targets and hypotheses are random token edits of the source."""
    rng = random.Random(seed)

    def token() -> str:
        return rng.choice(FUNCTION_WORDS) if rng.random() < 0.45 else f"w{rng.randrange(3000)}"

    def edited(tokens: List[str], edits: int) -> List[str]:
        tokens = list(tokens)
        for _ in range(edits):
            position = rng.randint(0, len(tokens))
            kind = rng.random()
            if kind < 0.4 and position < len(tokens):
                tokens[position] = token()
            elif kind < 0.7:
                tokens.insert(position, token())
            elif position < len(tokens):
                del tokens[position]
        return tokens

    m2_lines: List[str] = []
    hypotheses: List[str] = []
    for _ in range(sentences):
        source = [token() for _ in range(max(1, int(rng.gauss(23, 10))))]
        targets = [edited(source, rng.randint(0, 4)) for _ in range(2)]
        m2_lines += format_block(source, {a: align_edits(source, t) for a, t in enumerate(targets)}).split("\n")
        m2_lines.append("")
        hypotheses.append(" ".join(edited(rng.choice(targets), rng.randint(0, 3))))
    return m2_lines, hypotheses


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sentences", type=int, default=1312)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    m2_lines, hypotheses = synthetic_corpus(args.sentences, args.seed)
    sentences = parse_m2(m2_lines)
    wall, cpu = time.perf_counter(), time.process_time()
    counts = M2Scorer().score(hypotheses, sentences)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    print(
        f"{len(sentences)} sentences scored in {wall:.2f} s ({cpu:.2f} s CPU) "
        f"(P {counts.precision:.4f}  R {counts.recall:.4f}  F0.5 {counts.f_score(0.5):.4f})"
    )


if __name__ == "__main__":
    main()
