"""The table of examples/distillation/step_counts.sh (markdown on standard output) and its
OUT_DIR/step-scores.json for ``python -m ode_seq.cli.analyze --step-scores``.

    python -m examples.distillation.step_count_table --out-dir DIR --ref REF --checkpoint CKPT --steps 3 6 12
"""

from __future__ import annotations

import argparse
import json
import os

from examples.translation.evaluation import read_evaluation  # the checkout on PYTHONPATH (examples/lib.sh)
from ode_seq.checkpoint_files import load_checkpoint
from ode_seq.text_files import read_lines


def trained_setting(checkpoint: str) -> dict:
    """Steps and interval of the checkpoint's stacks (the model options it was trained with)."""
    config = load_checkpoint(checkpoint)["cfg"]["model"]
    interval = {
        side: getattr(config, f"{side}_share_group_size", None) or getattr(config, f"{side}_layers")
        for side in ("encoder", "decoder")
    }
    steps = {side: getattr(config, f"{side}_ode_steps", None) or interval[side] for side in interval}
    return {"steps": steps, "interval": interval}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out-dir", required=True)
    parser.add_argument("--ref", required=True, help="detokenised test references")
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--steps", type=int, nargs="+", required=True)
    args = parser.parse_args()
    references = len(read_lines(args.ref))
    trained = trained_setting(args.checkpoint)
    interval = trained["interval"]["encoder"]
    rows = {n: read_evaluation(os.path.join(args.out_dir, f"N{n}"), references) for n in args.steps}
    lines = [
        f"Trained with {trained['steps']['encoder']} encoder and {trained['steps']['decoder']} "
        f"decoder steps over [0, {interval}]; decoded at N steps of both stacks without "
        f"retraining. sacreBLEU 13a on {references} test verses, every one translated.",
        "",
        "| N | step size h | sacreBLEU | decoding seconds |",
        "|---|---|---|---|",
    ]
    for n, row in rows.items():
        mark = " (trained)" if n == trained["steps"]["encoder"] else ""
        lines.append(f"| {n}{mark} | {interval / n:.3g} | {row['bleu']:.2f} | {row['seconds']:.1f} |")
    lines += ["", f"sacreBLEU signature: {next(iter(rows.values()))['signature']}"]
    print("\n".join(lines))
    with open(os.path.join(args.out_dir, "step-scores.json"), "w", encoding="utf-8") as f:
        json.dump({"steps": list(rows), "scores": [r["bleu"] for r in rows.values()], "metric": "sacreBLEU 13a"}, f)


if __name__ == "__main__":
    main()
