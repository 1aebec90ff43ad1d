#!/usr/bin/env bash
# Train a base 6-6 ODE Transformer on CNN/DailyMail with the paper's recipe (recipe.sh). The
# paper's effective batch, 8 GPUs × 4096 tokens × update-freq 4 = 131072 tokens per update, is kept
# for any device count: update-freq = ceil(131072 / (devices × max-tokens)).
# Skipped when SAVE_DIR/train.done exists; an interrupted run resumes from checkpoint_last.pt.
#
# Usage: train.sh [options] [-- extra fairseq-train options]
#   --work-dir DIR        prepare.sh's work dir; data in WORK_DIR/bin (default: work-dirs/cnndm)
#   --method M            residual | rk2-learned | rk4: the paper's rows (default: rk4)
#   --arch NAME           fairseq architecture (default: the method's)
#   --save-dir DIR        checkpoints (default: WORK_DIR/checkpoints/METHOD)
#   --gpus N              0 = train on the CPU, N > 1 = data-parallel on N GPUs
#                         (default: 1 if CUDA is visible, else 0; the paper used 8)
#   --max-tokens N        tokens per device batch (default: 4096)
#   --update-freq N       gradient accumulation (default: the paper's effective batch, above)
#   --max-epoch N         (default: 20)
#   --max-update N        stop after N updates (default: 0, no limit)
#   --no-fp16             train in fp32 (always so on the CPU)
#   --seed N              (default: 1)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
refuse_environment DATA_DIR=--work-dir METHOD=--method ARCH=--arch SAVE_DIR=--save-dir GPUS=--gpus \
  MAX_TOKENS=--max-tokens UPDATE_FREQ=--update-freq MAX_EPOCH=--max-epoch FP16=--no-fp16 SEED=--seed \
  PYTHON=ODE_SEQ_VENV
# shellcheck source=recipe.sh
source "$REPO_ROOT/examples/summarization/recipe.sh"

WORK_DIR="$REPO_ROOT/work-dirs/cnndm"
METHOD=rk4
ARCH=""
SAVE_DIR=""
GPUS=""
MAX_TOKENS="$CNNDM_MAX_TOKENS"
UPDATE_FREQ=""
MAX_EPOCH="$CNNDM_MAX_EPOCH"
MAX_UPDATE=0
FP16=fp16
SEED=1
EXTRA=()

while [[ $# -gt 0 ]]; do
  case "$1" in
    --work-dir) require_option_value "$@"; WORK_DIR="$2"; shift 2 ;;
    --method) require_option_value "$@"; METHOD="$2"; shift 2 ;;
    --arch) require_option_value "$@"; ARCH="$2"; shift 2 ;;
    --save-dir) require_option_value "$@"; SAVE_DIR="$2"; shift 2 ;;
    --gpus) require_option_value "$@"; GPUS="$2"; shift 2 ;;
    --max-tokens) require_option_value "$@"; MAX_TOKENS="$2"; shift 2 ;;
    --update-freq) require_option_value "$@"; UPDATE_FREQ="$2"; shift 2 ;;
    --max-epoch) require_option_value "$@"; MAX_EPOCH="$2"; shift 2 ;;
    --max-update) require_option_value "$@"; MAX_UPDATE="$2"; shift 2 ;;
    --no-fp16) FP16=""; shift ;;
    --seed) require_option_value "$@"; SEED="$2"; shift 2 ;;
    --) shift; EXTRA=("$@"); break ;;
    -h|--help) usage; exit 0 ;;
    *) unknown_option "$1" ;;
  esac
done
[[ -n "${CNNDM_ARCH_OF_METHOD[$METHOD]+set}" ]] \
  || usage_error "--method must be one of: ${!CNNDM_ARCH_OF_METHOD[*]}, got $METHOD"
require_positive --max-tokens "$MAX_TOKENS"
require_positive --max-epoch "$MAX_EPOCH"
require_whole --max-update "$MAX_UPDATE"
require_whole --seed "$SEED"
[[ -z "$UPDATE_FREQ" ]] || require_positive --update-freq "$UPDATE_FREQ"
[[ -z "$GPUS" ]] || require_gpus "$GPUS"
ARCH="${ARCH:-${CNNDM_ARCH_OF_METHOD[$METHOD]}}"
SAVE_DIR="${SAVE_DIR:-$WORK_DIR/checkpoints/$METHOD}"
use_project_python
require_file "$WORK_DIR/bin/dict.source.txt" "run examples/summarization/prepare.sh --work-dir $WORK_DIR first"
run_stage "$SAVE_DIR/train.done" "training $ARCH" || exit 0
GPUS="${GPUS:-$(default_gpus)}"

DEVICES=$((GPUS > 0 ? GPUS : 1))
UPDATE_FREQ="${UPDATE_FREQ:-$(((CNNDM_TOKENS_PER_UPDATE + DEVICES * MAX_TOKENS - 1) / (DEVICES * MAX_TOKENS)))}"
log "$ARCH, $DEVICES device(s) x $MAX_TOKENS tokens x update-freq $UPDATE_FREQ =" \
  "$((DEVICES * MAX_TOKENS * UPDATE_FREQ)) tokens/update (paper: $CNNDM_TOKENS_PER_UPDATE)"

# shellcheck disable=SC2046  # the device options are words
run_training "$SAVE_DIR" python -m fairseq_cli.train "$WORK_DIR/bin" \
  --user-dir "$REPO_ROOT/user_dir" --task translation --source-lang source --target-lang target \
  --arch "$ARCH" --share-all-embeddings \
  --optimizer adam --adam-betas "$CNNDM_ADAM_BETAS" \
  --lr "$CNNDM_LR" --lr-scheduler inverse_sqrt --warmup-updates "$CNNDM_WARMUP_UPDATES" \
  --warmup-init-lr "$CNNDM_WARMUP_INIT_LR" --weight-decay "$CNNDM_WEIGHT_DECAY" \
  --criterion label_smoothed_cross_entropy --label-smoothing "$CNNDM_LABEL_SMOOTHING" \
  --max-tokens "$MAX_TOKENS" --update-freq "$UPDATE_FREQ" --max-epoch "$MAX_EPOCH" \
  --max-update "$MAX_UPDATE" --save-dir "$SAVE_DIR" --keep-last-epochs 5 --seed "$SEED" \
  --log-format simple $(train_device_options "$GPUS" "$FP16") "${EXTRA[@]}"
