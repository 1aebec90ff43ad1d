#!/usr/bin/env bash
# The CPU demo on the bundled English→Spanish Bible corpus: prepare → train a small RK4
# ODE Transformer for a fixed time → average its last checkpoints → beam search → BLEU.
# With --compare the residual (Euler) baseline of the same size is trained the same way and
# both are reported. Reruns reuse every finished stage in --work-dir.
#
# Usage: run_bible_demo.sh [options] [-- extra fairseq-train options]
#   --work-dir DIR        (default: work-dirs/bible-en-es)
#   --arch NAME           (default: $ODE_SEQ_ARCH or ode_transformer_rk4_small)
#   --compare             also train ode_transformer_euler_small (doubles the training time)
#   --minutes M           training time per model (default: 12)
#   --max-update N        update budget instead of / besides time (0 = none; default: 0)
#   --save-interval-updates N   checkpoint spacing; the newest 5 are averaged (default: 50)
#   --max-len-a A --max-len-b B   translations stop at A·source length + B tokens (default: 1.5, 10;
#                         this bounds beam search of an undertrained model, real verses need < 1.5x+10)
#   --train-pairs N --valid-pairs N --test-pairs N --vocab-size N --workers N   for prepare_bible.sh
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
HERE="$REPO_ROOT/examples/translation"

WORK_DIR="$REPO_ROOT/work-dirs/bible-en-es"
ARCHS=("${ODE_SEQ_ARCH:-ode_transformer_rk4_small}")
BASELINE=ode_transformer_euler_small
MINUTES=12
MAX_UPDATE=0
SAVE_INTERVAL_UPDATES=50
MAX_LEN_A=1.5
MAX_LEN_B=10
PREPARE_ARGS=()
TRAIN_EXTRA=()

while [[ $# -gt 0 ]]; do
  case "$1" in
    --work-dir) require_option_value "$@"; WORK_DIR="$2"; shift 2 ;;
    --arch) require_option_value "$@"; ARCHS[0]="$2"; shift 2 ;;
    --compare) ARCHS+=("$BASELINE"); shift ;;
    --minutes) require_option_value "$@"; MINUTES="$2"; shift 2 ;;
    --max-update) require_option_value "$@"; MAX_UPDATE="$2"; shift 2 ;;
    --save-interval-updates) require_option_value "$@"; SAVE_INTERVAL_UPDATES="$2"; shift 2 ;;
    --max-len-a) require_option_value "$@"; MAX_LEN_A="$2"; shift 2 ;;
    --max-len-b) require_option_value "$@"; MAX_LEN_B="$2"; shift 2 ;;
    --train-pairs|--valid-pairs|--test-pairs|--vocab-size|--workers)
      require_option_value "$@"; PREPARE_ARGS+=("$1" "$2"); shift 2 ;;
    --) shift; TRAIN_EXTRA=("$@"); break ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d'; exit 0 ;;
    *) die "unknown option $1 (see --help)" ;;
  esac
done

"$HERE/prepare_bible.sh" --work-dir "$WORK_DIR" "${PREPARE_ARGS[@]}"

for arch in "${ARCHS[@]}"; do
  save_dir="$WORK_DIR/checkpoints/$arch"
  "$HERE/train_bible.sh" --data-bin "$WORK_DIR/data-bin" --save-dir "$save_dir" --arch "$arch" \
    --minutes "$MINUTES" --max-update "$MAX_UPDATE" \
    --save-interval-updates "$SAVE_INTERVAL_UPDATES" -- "${TRAIN_EXTRA[@]}"
  saved="$(find "$save_dir" -maxdepth 1 -name 'checkpoint_*_*.pt' | wc -l)"
  if [[ "$saved" -ge 2 ]]; then
    average=(--average-last "$((saved < 5 ? saved : 5))" --checkpoint-kind update)
  else
    average=(--average-last 1)
  fi
  "$HERE/evaluate.sh" --data-bin "$WORK_DIR/data-bin" --checkpoint-dir "$save_dir" \
    --ref "$WORK_DIR/raw/test.es" --lang es "${average[@]}" \
    -- --max-len-a "$MAX_LEN_A" --max-len-b "$MAX_LEN_B" > /dev/null
done

echo
echo "English→Spanish Bible test set ($(wc -l < "$WORK_DIR/raw/test.es") verses), beam 4, lenpen 0.6:"
for arch in "${ARCHS[@]}"; do
  echo "== $arch"
  cat "$WORK_DIR/checkpoints/$arch/eval-test/scores.txt"
done
