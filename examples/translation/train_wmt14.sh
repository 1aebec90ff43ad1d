#!/usr/bin/env bash
# Train one of the ODE Transformer paper's WMT14 configurations (Li et al., ACL 2022).
# The recipe table below is the single place that holds the published hyperparameters.
# The effective batch of the paper, 4096 tokens × 8 GPUs × PAPER_UPDATE_FREQ per update, is kept
# for any GPU count and --max-tokens: update-freq = ceil(4096·8·PAPER_UPDATE_FREQ / (gpus·max-tokens)).
# fairseq resumes from SAVE_DIR/checkpoint_last.pt; SAVE_DIR/train.done marks a finished run.
#
# Usage: train_wmt14.sh --recipe NAME --data-bin DIR [options] [-- extra fairseq-train options]
#   --recipe NAME     base-residual | base-rk2-learned | base-rk4 | big-residual |
#                     big-rk2-learned | big-e12-residual-rpr | big-e12-rk2-learned-rpr
#   --pair en-de|en-fr     selects the paper's update-freq (default: en-de)
#   --save-dir DIR         (default: work-dirs/checkpoints/wmt14-PAIR-RECIPE)
#   --gpus N               GPUs to train on (default: all visible, from nvidia-smi)
#   --max-tokens N         tokens per GPU per batch (default: 4096)
#   --update-freq N        override the computed value (changes the effective batch)
#   --max-epoch N          (default: the recipe's)
#   --no-fp16              train in fp32
#   --dry-run              print the fairseq-train command and exit
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# Published setup (paper §4 and its public recipes): pre-norm, shared embeddings on a joint
# dictionary, Adam β=(0.9, 0.997), inverse_sqrt with lr 0.002, warmup 16000 from 1e-7,
# label-smoothed cross-entropy 0.1, 4096 tokens × 8 GPUs, update-freq 2–4 (En-De) and 8 (En-Fr),
# 20–40 epochs. Where the public recipes disagree we use En-De update-freq 2 and 20 epochs: with
# 4.5M pairs this gives ~50K updates, so the 16K warmup is a third of training (update-freq 4 over
# 20 epochs would spend most of training in warmup, and 40 epochs doubles the cost for the same
# number of updates).
PAPER_TOKENS_PER_GPU=4096
PAPER_GPUS=8
ADAM_BETAS='(0.9, 0.997)'
LR=0.002
WARMUP=16000
WARMUP_INIT_LR=1e-07
LABEL_SMOOTHING=0.1
MAX_EPOCH_DEFAULT=20
declare -A PAPER_UPDATE_FREQ=([en-de]=2 [en-fr]=8)
declare -A RECIPE_ARCH=(
  [base-residual]=ode_transformer_euler
  [base-rk2-learned]=ode_transformer_rk2_learned
  [base-rk4]=ode_transformer_rk4
  [big-residual]=ode_transformer_euler_wmt_en_de_big
  [big-rk2-learned]=ode_transformer_rk2_learned_wmt_en_de_big
  [big-e12-residual-rpr]=ode_transformer_euler_rpr_wmt_en_de_big_e12
  [big-e12-rk2-learned-rpr]=ode_transformer_rk2_learned_rpr_wmt_en_de_big_e12
)

RECIPE=""
PAIR=en-de
DATA_BIN=""
SAVE_DIR=""
GPUS=""
MAX_TOKENS=4096
UPDATE_FREQ=""
MAX_EPOCH="$MAX_EPOCH_DEFAULT"
FP16=(--fp16)
DRY_RUN=0
EXTRA=()

while [[ $# -gt 0 ]]; do
  case "$1" in
    --recipe) require_option_value "$@"; RECIPE="$2"; shift 2 ;;
    --pair) require_option_value "$@"; PAIR="$2"; shift 2 ;;
    --data-bin) require_option_value "$@"; DATA_BIN="$2"; shift 2 ;;
    --save-dir) require_option_value "$@"; SAVE_DIR="$2"; shift 2 ;;
    --gpus) require_option_value "$@"; GPUS="$2"; shift 2 ;;
    --max-tokens) require_option_value "$@"; MAX_TOKENS="$2"; shift 2 ;;
    --update-freq) require_option_value "$@"; UPDATE_FREQ="$2"; shift 2 ;;
    --max-epoch) require_option_value "$@"; MAX_EPOCH="$2"; shift 2 ;;
    --no-fp16) FP16=(); shift ;;
    --dry-run) DRY_RUN=1; shift ;;
    --) shift; EXTRA=("$@"); break ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d'; exit 0 ;;
    *) die "unknown option $1 (see --help)" ;;
  esac
done
[[ -n "$RECIPE" && -n "${RECIPE_ARCH[$RECIPE]:-}" ]] \
  || die "--recipe must be one of: ${!RECIPE_ARCH[*]}"
[[ -n "${PAPER_UPDATE_FREQ[$PAIR]:-}" ]] || die "--pair must be en-de or en-fr, got $PAIR"
[[ -n "$DATA_BIN" ]] || die "--data-bin is required (run prepare_wmt14.sh first)"
if [[ -z "$GPUS" ]]; then
  GPUS="$(nvidia-smi --list-gpus 2>/dev/null | wc -l || true)"
  [[ "$GPUS" -gt 0 ]] || die "no GPU found by nvidia-smi; pass --gpus N (these models need GPUs)"
fi
for n in "$GPUS" "$MAX_TOKENS" "$MAX_EPOCH" ${UPDATE_FREQ:+"$UPDATE_FREQ"}; do
  [[ "$n" =~ ^[1-9][0-9]*$ ]] || die "a positive whole number was expected, got '$n'"
done
PAPER_TOKENS=$((PAPER_TOKENS_PER_GPU * PAPER_GPUS * ${PAPER_UPDATE_FREQ[$PAIR]}))
if [[ -z "$UPDATE_FREQ" ]]; then
  UPDATE_FREQ=$(( (PAPER_TOKENS + GPUS * MAX_TOKENS - 1) / (GPUS * MAX_TOKENS) ))
fi
EFFECTIVE_TOKENS=$((GPUS * MAX_TOKENS * UPDATE_FREQ))
log "recipe $RECIPE ($PAIR): ${RECIPE_ARCH[$RECIPE]}, $GPUS GPU(s) × $MAX_TOKENS tokens × update-freq" \
  "$UPDATE_FREQ = $EFFECTIVE_TOKENS tokens per update (paper: $PAPER_TOKENS)"
[[ "$EFFECTIVE_TOKENS" -eq "$PAPER_TOKENS" ]] \
  || log "warning: the effective batch differs from the paper's by $EFFECTIVE_TOKENS/$PAPER_TOKENS"
SAVE_DIR="${SAVE_DIR:-$REPO_ROOT/work-dirs/checkpoints/wmt14-$PAIR-$RECIPE}"

COMMAND=(fairseq-train "$DATA_BIN" --user-dir "$REPO_ROOT/user_dir" --arch "${RECIPE_ARCH[$RECIPE]}"
  --share-all-embeddings
  --optimizer adam --adam-betas "$ADAM_BETAS" --clip-norm 0.0
  --lr "$LR" --lr-scheduler inverse_sqrt --warmup-updates "$WARMUP" --warmup-init-lr "$WARMUP_INIT_LR"
  --criterion label_smoothed_cross_entropy --label-smoothing "$LABEL_SMOOTHING"
  --max-tokens "$MAX_TOKENS" --update-freq "$UPDATE_FREQ" --distributed-world-size "$GPUS"
  --max-epoch "$MAX_EPOCH" --keep-last-epochs 5 --save-dir "$SAVE_DIR"
  --log-format simple --log-interval 100 "${FP16[@]}" "${EXTRA[@]}")
if [[ "$DRY_RUN" -eq 1 ]]; then
  printf '%q ' "${COMMAND[@]}"
  echo
  exit 0
fi
require_file "$DATA_BIN/dict.en.txt" "run examples/translation/prepare_wmt14.sh first"
stage_done "$SAVE_DIR/train.done" "training $RECIPE" && exit 0
mkdir -p "$SAVE_DIR"
"${COMMAND[@]}" 2>&1 | tee -a "$SAVE_DIR/train.log"
require_file "$SAVE_DIR/checkpoint_last.pt" "fairseq-train stopped before saving; see $SAVE_DIR/train.log"
touch "$SAVE_DIR/train.done"
