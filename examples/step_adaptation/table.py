"""The results table of examples/step_adaptation/run.sh (markdown on standard output).

    python -m examples.step_adaptation.table --work-dir DIR --steps N --step-counts 3 4 8 --ref REF

Per step count N' and variant (zero-shot, full, lora) it reads WORK_DIR/adapt/N'/VARIANT:
eval-test/scores.json (sacreBLEU 13a), eval-test/generate.log (fairseq-generate's
"Translated … in Xs": decoding time, model loading excluded), eval-test/generate-test.txt (one
hypothesis per reference line is required) and, for the fine-tunes, train.log (fairseq's count of
trained parameters).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from typing import Dict, List, Optional

from examples.translation.evaluation import read_evaluation, read_text  # the checkout on PYTHONPATH (examples/lib.sh)
from ode_seq.text_files import read_lines  # noqa: E402

VARIANTS = ("zero-shot", "full", "lora")
TRAINED = re.compile(r"num\. shared model params: ([\d,]+) \(num\. trained: ([\d,]+)\)")


def variant_row(directory: str, references: int) -> Dict[str, object]:
    """BLEU, decoding seconds, hypotheses and trained parameters of one model."""
    row: Dict[str, object] = dict(read_evaluation(os.path.join(directory, "eval-test"), references))
    trained: Optional[int] = None
    if os.path.isfile(os.path.join(directory, "train.log")):
        match = TRAINED.search(read_text(os.path.join(directory, "train.log")))
        trained = int(match.group(2).replace(",", "")) if match else None
    row["trained"] = trained
    return row


def table(work_dir: str, steps: int, step_counts: List[int], references: int) -> str:
    rows = {
        n: {v: variant_row(os.path.join(work_dir, "adapt", f"N{n}", v), references) for v in VARIANTS}
        for n in step_counts
    }
    lines = [
        f"Trained with N = {steps} steps per stack; N' = {steps} is the control (fine-tuning "
        "without a change of step count). BLEU: sacreBLEU 13a on "
        f"{references} test verses, every one translated by every model.",
        "",
        "| N' | layers per stack | BLEU zero-shot | BLEU full fine-tune | BLEU LoRA fine-tune "
        "| trained parameters full / LoRA | decoding seconds zero-shot / full / LoRA |",
        "|---|---|---|---|---|---|---|",
    ]
    for n, row in rows.items():
        full, lora = row["full"], row["lora"]
        lines.append(
            f"| {n}{' (= N)' if n == steps else ''} | {n} | {row['zero-shot']['bleu']:.2f} "
            f"| {full['bleu']:.2f} | {lora['bleu']:.2f} "
            f"| {full['trained'] or 0:,} / {lora['trained'] or 0:,} "
            f"| {row['zero-shot']['seconds']:.1f} / {full['seconds']:.1f} / {lora['seconds']:.1f} |"
        )
    signature = next(iter(rows.values()))["zero-shot"]["signature"]
    lines += ["", f"sacreBLEU signature: {signature}"]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work-dir", required=True)
    parser.add_argument("--steps", type=int, required=True, help="training step count N")
    parser.add_argument("--step-counts", type=int, nargs="+", required=True)
    parser.add_argument("--ref", required=True, help="detokenised test references")
    args = parser.parse_args()
    references = len(read_lines(args.ref))
    sys.stdout.write(table(args.work_dir, args.steps, args.step_counts, references))


if __name__ == "__main__":
    main()
