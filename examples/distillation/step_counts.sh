#!/usr/bin/env bash
# Decode one trained ODE model at several step counts without retraining (ODE-ViT: a stable ODE
# student should work at any step count at inference): for every N of --steps, fairseq-generate
# with --model-overrides "{'encoder_ode_steps': N, 'decoder_ode_steps': N}" (beam 4, lenpen 0.6),
# score it (evaluate.sh), then write OUT_DIR/results.md (N, step size, sacreBLEU, decoding time)
# and OUT_DIR/step-scores.json for `python -m ode_seq.cli.analyze --step-scores`.
# Each N's stages are skipped when their output exists in OUT_DIR/N<N>.
#
# Usage: step_counts.sh --checkpoint FILE --data-bin DIR --ref FILE --lang LANG [options] [-- generate options]
#   --checkpoint FILE     a fixed-grid ODE model (e.g. the distilled student's eval-test/averaged.pt)
#   --data-bin DIR        its data
#   --ref FILE --lang L   detokenised references of the test set and their language
#   --steps "N ..."       step counts of both stacks (default: "1 2 3 4 6 8 12 24")
#   --out-dir DIR         (default: the checkpoint's directory/step-counts)
#   --gpus N              0 = decode on the CPU, 1 = on a GPU (default: 1 if CUDA is visible, else 0)
# Anything after `--` is passed to fairseq-generate (default here: --max-len-a 1.5 --max-len-b 10).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"

CHECKPOINT=""
DATA_BIN=""
REF=""
LANG_TGT=""
STEPS="1 2 3 4 6 8 12 24"
OUT_DIR=""
GPUS=""
EXTRA=(--max-len-a 1.5 --max-len-b 10)

while [[ $# -gt 0 ]]; do
  case "$1" in
    --checkpoint) require_option_value "$@"; CHECKPOINT="$2"; shift 2 ;;
    --data-bin) require_option_value "$@"; DATA_BIN="$2"; shift 2 ;;
    --ref) require_option_value "$@"; REF="$2"; shift 2 ;;
    --lang) require_option_value "$@"; LANG_TGT="$2"; shift 2 ;;
    --steps) require_option_value "$@"; STEPS="$2"; shift 2 ;;
    --out-dir) require_option_value "$@"; OUT_DIR="$2"; shift 2 ;;
    --gpus) require_option_value "$@"; GPUS="$2"; shift 2 ;;
    --) shift; EXTRA=("$@"); break ;;
    -h|--help) usage; exit 0 ;;
    *) unknown_option "$1" ;;
  esac
done
[[ -n "$CHECKPOINT" && -n "$DATA_BIN" && -n "$REF" && -n "$LANG_TGT" ]] \
  || usage_error "--checkpoint, --data-bin, --ref and --lang are required (see --help)"
for n in $STEPS; do
  [[ "$n" =~ ^[1-9][0-9]*$ ]] || usage_error "--steps takes positive whole numbers, got '$n'"
done
[[ -z "$GPUS" ]] || require_gpus "$GPUS" decoding
use_project_python
GPUS="${GPUS:-$(default_gpus)}"
require_file "$CHECKPOINT" "pass a trained model with --checkpoint"
OUT_DIR="${OUT_DIR:-$(dirname "$CHECKPOINT")/step-counts}"

for n in $STEPS; do
  mkdir -p "$OUT_DIR/N$n"
  # evaluate.sh decodes OUT/averaged.pt when it exists: the same checkpoint for every N.
  [[ -e "$OUT_DIR/N$n/averaged.pt" ]] || ln "$CHECKPOINT" "$OUT_DIR/N$n/averaged.pt" 2>/dev/null \
    || cp "$CHECKPOINT" "$OUT_DIR/N$n/averaged.pt"
  "$REPO_ROOT/examples/translation/evaluate.sh" --data-bin "$DATA_BIN" --checkpoint-dir "$OUT_DIR" \
    --gpus "$GPUS" --out-dir "$OUT_DIR/N$n" --ref "$REF" --lang "$LANG_TGT" \
    -- --model-overrides "{'encoder_ode_steps': $n, 'decoder_ode_steps': $n}" "${EXTRA[@]}" > /dev/null
done

# shellcheck disable=SC2086
python "$REPO_ROOT/examples/distillation/step_count_table.py" --out-dir "$OUT_DIR" --ref "$REF" \
  --checkpoint "$CHECKPOINT" --steps $STEPS > "$OUT_DIR/results.md.tmp"
publish "$OUT_DIR/results.md.tmp" "$OUT_DIR/results.md"
cat "$OUT_DIR/results.md"
