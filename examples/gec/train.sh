#!/usr/bin/env bash
# Train a GEC model with the ODE Transformer paper's CoNLL-14 recipe (Li et al. 2022): base 6-6,
# Adam (0.9, 0.98), lr 0.0015, inverse-sqrt schedule with 4000 warm-up updates, weight decay 1e-4,
# dropout 0.2, label-smoothed cross-entropy 0.1, shared embeddings (joined dictionary),
# update-freq 2, 55 epochs. These flags are the recipe's one definition; README.md cites them.
# Training resumes from SAVE_DIR/checkpoint_last.pt; SAVE_DIR/train.done marks a finished run.
#
# Usage: train.sh [options] [-- extra fairseq-train options, given last so they override the recipe]
#   --work-dir DIR        prepare.sh's work dir (default: work-dirs/gec)
#   --data-bin DIR        binarised data (default: WORK_DIR/data-bin)
#   --arch NAME           ode_transformer_euler (residual) | ode_transformer_rk2_learned |
#                         ode_transformer_rk4, or any fairseq architecture (default: ode_transformer_rk4)
#   --save-dir DIR        checkpoints (default: WORK_DIR/checkpoints/ARCH)
#   --gpus N              0 = train on the CPU, N > 1 = data-parallel on N GPUs
#                         (default: 1 if CUDA is visible, else 0)
#   --max-tokens N        tokens per device batch (default: 4096)
#   --update-freq N       gradient accumulation (default: 2)
#   --max-epoch N         (default: 55)
#   --max-update N        stop after N updates (default: 0, no limit)
#   --seed N              (default: 1)
#   --no-fp16             train in fp32 (always so on the CPU)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
refuse_environment ARCH=--arch DATA_BIN=--data-bin SAVE_DIR=--save-dir GPUS=--gpus CPU="--gpus 0" \
  MAX_TOKENS=--max-tokens UPDATE_FREQ=--update-freq MAX_EPOCH=--max-epoch MAX_UPDATE=--max-update \
  SEED=--seed FP16=--no-fp16 EXTRA_ARGS="options after --" PYTHON=ODE_SEQ_VENV

WORK_DIR="$REPO_ROOT/work-dirs/gec"
DATA_BIN=""
ARCH=ode_transformer_rk4
SAVE_DIR=""
GPUS=""
MAX_TOKENS=4096
UPDATE_FREQ=2
MAX_EPOCH=55
MAX_UPDATE=0
SEED=1
FP16=fp16
EXTRA=()

while [[ $# -gt 0 ]]; do
  case "$1" in
    --work-dir) require_option_value "$@"; WORK_DIR="$2"; shift 2 ;;
    --data-bin) require_option_value "$@"; DATA_BIN="$2"; shift 2 ;;
    --arch) require_option_value "$@"; ARCH="$2"; shift 2 ;;
    --save-dir) require_option_value "$@"; SAVE_DIR="$2"; shift 2 ;;
    --gpus) require_option_value "$@"; GPUS="$2"; shift 2 ;;
    --max-tokens) require_option_value "$@"; MAX_TOKENS="$2"; shift 2 ;;
    --update-freq) require_option_value "$@"; UPDATE_FREQ="$2"; shift 2 ;;
    --max-epoch) require_option_value "$@"; MAX_EPOCH="$2"; shift 2 ;;
    --max-update) require_option_value "$@"; MAX_UPDATE="$2"; shift 2 ;;
    --seed) require_option_value "$@"; SEED="$2"; shift 2 ;;
    --no-fp16) FP16=""; shift ;;
    --) shift; EXTRA=("$@"); break ;;
    -h|--help) usage; exit 0 ;;
    *) unknown_option "$1" ;;
  esac
done
require_positive --max-tokens "$MAX_TOKENS"
require_positive --update-freq "$UPDATE_FREQ"
require_positive --max-epoch "$MAX_EPOCH"
require_whole --max-update "$MAX_UPDATE"
require_whole --seed "$SEED"
[[ -z "$GPUS" ]] || require_gpus "$GPUS"
DATA_BIN="${DATA_BIN:-$WORK_DIR/data-bin}"
SAVE_DIR="${SAVE_DIR:-$WORK_DIR/checkpoints/$ARCH}"
use_project_python
require_file "$DATA_BIN/dict.src.txt" "run examples/gec/prepare.sh first (or pass --data-bin)"
run_stage "$SAVE_DIR/train.done" "training $ARCH" || exit 0
GPUS="${GPUS:-$(default_gpus)}"

# shellcheck disable=SC2046  # the device options are words
run_training "$SAVE_DIR" fairseq-train "$DATA_BIN" --user-dir "$REPO_ROOT/user_dir" \
  --task translation --source-lang src --target-lang tgt \
  --arch "$ARCH" --share-all-embeddings \
  --optimizer adam --adam-betas '(0.9, 0.98)' --lr 0.0015 \
  --lr-scheduler inverse_sqrt --warmup-updates 4000 --warmup-init-lr 1e-07 \
  --weight-decay 0.0001 --dropout 0.2 \
  --criterion label_smoothed_cross_entropy --label-smoothing 0.1 \
  --max-tokens "$MAX_TOKENS" --update-freq "$UPDATE_FREQ" \
  --max-epoch "$MAX_EPOCH" --max-update "$MAX_UPDATE" \
  --seed "$SEED" --save-dir "$SAVE_DIR" --keep-last-epochs 5 \
  --no-progress-bar --log-format simple --log-interval 100 \
  $(train_device_options "$GPUS" "$FP16") "${EXTRA[@]}"
