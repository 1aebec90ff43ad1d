#!/usr/bin/env bash
# Train a small translation model on the prepared Bible data for a fixed time (or update) budget.
# fairseq resumes from SAVE_DIR/checkpoint_last.pt when a run was interrupted; SAVE_DIR/train.done
# marks a finished run, which is then skipped.
#
# Usage: train_bible.sh [options] [-- extra fairseq-train options]
#   --work-dir DIR        (default: work-dirs/bible-en-es)
#   --data-bin DIR        (default: WORK_DIR/data-bin)
#   --save-dir DIR        (default: WORK_DIR/checkpoints/ARCH)
#   --arch NAME           (default: ode_transformer_rk4_small)
#   --gpus N              0 = train on the CPU, N > 1 = data-parallel on N GPUs
#                         (default: 1 if CUDA is visible, else 0)
#   --minutes M           stop after M minutes of training, fairseq --stop-time-hours (default: 12)
#   --max-update N        stop after N updates instead (0 = no limit; default: 0)
#   --max-tokens N        tokens per batch (default: 2048)
#   --lr LR --warmup N    peak learning rate of inverse_sqrt and its warmup (default: 1e-3, 200)
#   --save-interval-updates N   checkpoint every N updates, the last 5 are kept (default: 50)
#   --seed N              (default: 1)
#   --expected-ups U      updates/s this setting reaches on an idle 2-core machine: progress lines
#                         state it and warn early when this machine is much slower (default: none)
# Anything after `--` is passed to fairseq-train (e.g. smaller sizes: --encoder-embed-dim 32).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"

WORK_DIR="$REPO_ROOT/work-dirs/bible-en-es"
DATA_BIN=""
SAVE_DIR=""
ARCH=ode_transformer_rk4_small
GPUS=""
MINUTES=12
MAX_UPDATE=0
MAX_TOKENS=2048
LR=1e-3
WARMUP=200
SAVE_INTERVAL_UPDATES=50
SEED=1
EXPECTED_UPS=""
EXTRA=()

while [[ $# -gt 0 ]]; do
  case "$1" in
    --work-dir) require_option_value "$@"; WORK_DIR="$2"; shift 2 ;;
    --data-bin) require_option_value "$@"; DATA_BIN="$2"; shift 2 ;;
    --save-dir) require_option_value "$@"; SAVE_DIR="$2"; shift 2 ;;
    --arch) require_option_value "$@"; ARCH="$2"; shift 2 ;;
    --gpus) require_option_value "$@"; GPUS="$2"; shift 2 ;;
    --minutes) require_option_value "$@"; MINUTES="$2"; shift 2 ;;
    --max-update) require_option_value "$@"; MAX_UPDATE="$2"; shift 2 ;;
    --max-tokens) require_option_value "$@"; MAX_TOKENS="$2"; shift 2 ;;
    --lr) require_option_value "$@"; LR="$2"; shift 2 ;;
    --warmup) require_option_value "$@"; WARMUP="$2"; shift 2 ;;
    --save-interval-updates) require_option_value "$@"; SAVE_INTERVAL_UPDATES="$2"; shift 2 ;;
    --seed) require_option_value "$@"; SEED="$2"; shift 2 ;;
    --expected-ups) require_option_value "$@"; EXPECTED_UPS="$2"; shift 2 ;;
    --) shift; EXTRA=("$@"); break ;;
    -h|--help) usage; exit 0 ;;
    *) unknown_option "$1" ;;
  esac
done
DATA_BIN="${DATA_BIN:-$WORK_DIR/data-bin}"
SAVE_DIR="${SAVE_DIR:-$WORK_DIR/checkpoints/$ARCH}"
require_whole --max-update "$MAX_UPDATE"
[[ "$MINUTES" =~ ^[0-9]+([.][0-9]+)?$ ]] || usage_error "--minutes must be a non-negative number, got $MINUTES"
[[ "$MAX_UPDATE" -gt 0 || ! "$MINUTES" =~ ^0*([.]0*)?$ ]] \
  || usage_error "give a budget: --minutes M and/or --max-update N"
[[ -z "$GPUS" ]] || require_gpus "$GPUS"
use_project_python
require_file "$DATA_BIN/dict.en.txt" "run examples/translation/prepare_bible.sh first (or pass --data-bin)"
STOP_HOURS="$(python -c "import sys; print(float(sys.argv[1]) / 60)" "$MINUTES")"
GPUS="${GPUS:-$(default_gpus)}"

run_stage "$SAVE_DIR/train.done" "training $ARCH" || exit 0
mkdir -p "$SAVE_DIR"
BUDGET=()
[[ "$MAX_UPDATE" -gt 0 ]] && BUDGET+=(--max-update "$MAX_UPDATE")
[[ "$STOP_HOURS" != "0.0" ]] && BUDGET+=(--stop-time-hours "$STOP_HOURS")

# One progress line per 10 updates (per tenth of a shorter budget).
LOG_INTERVAL=10
[[ "$MAX_UPDATE" -gt 0 && "$MAX_UPDATE" -lt 100 ]] && LOG_INTERVAL=$(( MAX_UPDATE >= 10 ? MAX_UPDATE / 10 : 1 ))

# fairseq's full output goes to train.log; the terminal gets progress lines with the time left.
PROGRESS=(python "$REPO_ROOT/examples/translation/train_progress.py" --max-update "$MAX_UPDATE"
          --log "$SAVE_DIR/train.log")
[[ -z "$EXPECTED_UPS" ]] || PROGRESS+=(--expected-ups "$EXPECTED_UPS")

# Pre-norm model, shared embeddings (joined dictionary), label-smoothed cross-entropy, Adam with
# inverse square-root decay: the paper's recipe scaled to a CPU. A 12-minute run on two cores makes
# only a few hundred updates, so batches are small (more updates for the same compute) and the
# warmup short (pre-norm Transformers train stably without a long one).
fairseq-train "$DATA_BIN" --user-dir "$REPO_ROOT/user_dir" --arch "$ARCH" \
  --share-all-embeddings --dropout 0.1 \
  --optimizer adam --adam-betas '(0.9, 0.98)' --clip-norm 0.0 \
  --lr "$LR" --lr-scheduler inverse_sqrt --warmup-updates "$WARMUP" --warmup-init-lr 1e-07 \
  --criterion label_smoothed_cross_entropy --label-smoothing 0.1 \
  --max-tokens "$MAX_TOKENS" --seed "$SEED" "${BUDGET[@]}" \
  --save-dir "$SAVE_DIR" --save-interval-updates "$SAVE_INTERVAL_UPDATES" --keep-interval-updates 5 \
  --no-epoch-checkpoints $(train_device_options "$GPUS") \
  --log-format simple --log-interval "$LOG_INTERVAL" "${EXTRA[@]}" 2>&1 | "${PROGRESS[@]}" \
  || die "fairseq-train failed (its last lines are above; the whole log: $SAVE_DIR/train.log)"

require_file "$SAVE_DIR/checkpoint_last.pt" "fairseq-train stopped before saving; see $SAVE_DIR/train.log"
touch "$SAVE_DIR/train.done"
