#!/usr/bin/env bash
# Step-count adaptation of a Neural ODE Transformer (Tong et al., ICLR 2025) on the bundled
# English→Spanish Bible corpus:
#   1. prepare the corpus (examples/translation/prepare_bible.sh);
#   2. train a non-autonomous model (ode_transformer_nonauto_small sizes given below: one layer
#      with weights θ(τ) per stack, Euler) with N steps per stack;
#   3. for every N' of --step-counts, materialise it at N' steps as a plain N'-layer fairseq
#      transformer (python -m ode_seq.cli.export) and
#        zero-shot: translate with it as it is;
#        full:      fine-tune all its weights (fairseq's transformer, --finetune-from-model);
#        lora:      fine-tune LoRA adapters only (lora_transformer), then merge them into it;
#      both fine-tunes get the same budget: --ft-updates updates of --max-tokens tokens;
#   4. translate the test set with every model (beam 4, lenpen 0.6), score it (sacreBLEU 13a),
#      time fairseq-generate's decoding and write WORK_DIR/results.md.
# N' = N is the control: what the fine-tuning budget gains without a change of step count.
# Every stage is skipped when its output exists in --work-dir.
#
# Usage: run.sh [options]
#   --work-dir DIR            (default: work-dirs/step-adaptation)
#   --gpus N                  0 = train on the CPU, N > 1 = data-parallel on N GPUs
#                             (default: 1 if CUDA is visible, else 0)
#   --steps N                 training steps of both stacks = their layers L (default: 6)
#   --step-counts "N' ..."    step counts to adapt to (default: "3 4 6 8 12")
#   --max-update N            training updates of the ODE model (default: 1200)
#   --lr LR --warmup N        its peak learning rate and inverse-sqrt warmup (default: 2e-3, 300)
#   --ft-updates N            updates of each fine-tune (default: 100)
#   --ft-lr LR --lora-lr LR   peak learning rates of full and LoRA fine-tuning (default: 5e-4, 2e-3)
#   --ft-warmup N             warmup of both fine-tunes (default: 20)
#   --lora-rank R --lora-alpha A   (default: 8, 16)
#   --embed-dim D --ffn-dim F --heads H   model sizes (default: 128, 512, 4)
#   --time-network NAME       per-block or per-weight (default: per-weight, as the official code)
#   --time-embed-dim D        d_e (default: 20)
#   --max-tokens N            tokens per batch in training and fine-tuning (default: 2048)
#   --seed N                  (default: 1)
#   --train-pairs N --valid-pairs N --test-pairs N --vocab-size N --workers N   for prepare_bible.sh
#                             (default here: all, 500, all, 4000, nproc)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
TRANSLATION="$REPO_ROOT/examples/translation"

WORK_DIR="$REPO_ROOT/work-dirs/step-adaptation"
GPUS=""
STEPS=6
STEP_COUNTS="3 4 6 8 12"
MAX_UPDATE=1200
LR=2e-3
WARMUP=300
FT_UPDATES=100
FT_LR=5e-4
LORA_LR=2e-3
FT_WARMUP=20
LORA_RANK=8
LORA_ALPHA=16
EMBED_DIM=128
FFN_DIM=512
HEADS=4
TIME_NETWORK=per-weight
TIME_EMBED_DIM=20
MAX_TOKENS=2048
SEED=1
PREPARE_ARGS=(--valid-pairs 500 --vocab-size 4000)

while [[ $# -gt 0 ]]; do
  case "$1" in
    --work-dir) require_option_value "$@"; WORK_DIR="$2"; shift 2 ;;
    --gpus) require_option_value "$@"; GPUS="$2"; shift 2 ;;
    --steps) require_option_value "$@"; STEPS="$2"; shift 2 ;;
    --step-counts) require_option_value "$@"; STEP_COUNTS="$2"; shift 2 ;;
    --max-update) require_option_value "$@"; MAX_UPDATE="$2"; shift 2 ;;
    --lr) require_option_value "$@"; LR="$2"; shift 2 ;;
    --warmup) require_option_value "$@"; WARMUP="$2"; shift 2 ;;
    --ft-updates) require_option_value "$@"; FT_UPDATES="$2"; shift 2 ;;
    --ft-lr) require_option_value "$@"; FT_LR="$2"; shift 2 ;;
    --lora-lr) require_option_value "$@"; LORA_LR="$2"; shift 2 ;;
    --ft-warmup) require_option_value "$@"; FT_WARMUP="$2"; shift 2 ;;
    --lora-rank) require_option_value "$@"; LORA_RANK="$2"; shift 2 ;;
    --lora-alpha) require_option_value "$@"; LORA_ALPHA="$2"; shift 2 ;;
    --embed-dim) require_option_value "$@"; EMBED_DIM="$2"; shift 2 ;;
    --ffn-dim) require_option_value "$@"; FFN_DIM="$2"; shift 2 ;;
    --heads) require_option_value "$@"; HEADS="$2"; shift 2 ;;
    --time-network) require_option_value "$@"; TIME_NETWORK="$2"; shift 2 ;;
    --time-embed-dim) require_option_value "$@"; TIME_EMBED_DIM="$2"; shift 2 ;;
    --max-tokens) require_option_value "$@"; MAX_TOKENS="$2"; shift 2 ;;
    --seed) require_option_value "$@"; SEED="$2"; shift 2 ;;
    --train-pairs|--valid-pairs|--test-pairs|--vocab-size|--workers)
      require_option_value "$@"; PREPARE_ARGS+=("$1" "$2"); shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) unknown_option "$1" ;;
  esac
done
for n in "$STEPS" $STEP_COUNTS "$MAX_UPDATE" "$WARMUP" "$FT_UPDATES" "$FT_WARMUP" "$LORA_RANK" \
         "$EMBED_DIM" "$FFN_DIM" "$HEADS" "$TIME_EMBED_DIM" "$MAX_TOKENS" "$SEED"; do
  [[ "$n" =~ ^[1-9][0-9]*$ ]] || usage_error "positive whole number expected, got '$n'"
done
[[ -n "$STEP_COUNTS" ]] || usage_error "--step-counts needs at least one step count"
[[ "$TIME_NETWORK" == per-block || "$TIME_NETWORK" == per-weight ]] \
  || usage_error "--time-network must be per-block or per-weight, got $TIME_NETWORK"
[[ -z "$GPUS" ]] || require_gpus "$GPUS"
use_project_python
GPUS="${GPUS:-$(default_gpus)}"

DATA_BIN="$WORK_DIR/data-bin"
ODE_DIR="$WORK_DIR/checkpoints/nonauto-N$STEPS"
width() {  # width LAYERS — the size options of a model with LAYERS layers per stack
  echo --encoder-embed-dim "$EMBED_DIM" --decoder-embed-dim "$EMBED_DIM" \
    --encoder-ffn-embed-dim "$FFN_DIM" --decoder-ffn-embed-dim "$FFN_DIM" \
    --encoder-attention-heads "$HEADS" --decoder-attention-heads "$HEADS" \
    --encoder-layers "$1" --decoder-layers "$1"
}
evaluate() {  # evaluate DIR — translate and score DIR/eval-test/averaged.pt (a plain transformer;
              # copied from DIR/checkpoint_last.pt when missing)
  "$TRANSLATION/evaluate.sh" --data-bin "$DATA_BIN" --checkpoint-dir "$1" --average-last 1 \
    --gpus "$(( GPUS > 0 ))" \
    --ref "$WORK_DIR/raw/test.es" --lang es -- --max-len-a 1.5 --max-len-b 10 > /dev/null
}
materialise() {  # materialise CHECKPOINT OUTPUT [export options] — a plain transformer checkpoint
  local checkpoint="$1" output="$2"
  shift 2
  if run_stage "$output" "export of $checkpoint"; then
    mkdir -p "$(dirname "$output")"
    python -m ode_seq.cli.export --path "$checkpoint" "$@" --output "$output.tmp.pt" >&2
    publish "$output.tmp.pt" "$output"
  fi
}
fine_tune() {  # fine_tune DIR N' ARCH LR [fairseq options] — fine-tune the model materialised at N'
  local dir="$1" steps="$2" arch="$3" lr="$4"
  shift 4
  # shellcheck disable=SC2046
  "$TRANSLATION/train_bible.sh" --data-bin "$DATA_BIN" --save-dir "$dir" --arch "$arch" \
    --minutes 0 --max-update "$FT_UPDATES" --lr "$lr" --warmup "$FT_WARMUP" \
    --max-tokens "$MAX_TOKENS" --seed "$SEED" --save-interval-updates "$FT_UPDATES" --gpus "$GPUS" \
    -- $(width "$steps") --encoder-normalize-before --decoder-normalize-before \
    --finetune-from-model "$WORK_DIR/adapt/N$steps/zero-shot/eval-test/averaged.pt" \
    --disable-validation "$@"
}

# 1. Data.
"$TRANSLATION/prepare_bible.sh" --work-dir "$WORK_DIR" "${PREPARE_ARGS[@]}"

# 2. The non-autonomous model: L = N layers, N Euler steps of size 1 per stack.
# shellcheck disable=SC2046
"$TRANSLATION/train_bible.sh" --data-bin "$DATA_BIN" --save-dir "$ODE_DIR" \
  --arch ode_transformer_nonauto_small --minutes 0 --max-update "$MAX_UPDATE" --lr "$LR" \
  --warmup "$WARMUP" --max-tokens "$MAX_TOKENS" --seed "$SEED" --gpus "$GPUS" \
  -- $(width "$STEPS") --time-network "$TIME_NETWORK" --time-embed-dim "$TIME_EMBED_DIM"

# 3. Every step count: zero-shot, full fine-tune, LoRA fine-tune.
for n in $STEP_COUNTS; do
  base="$WORK_DIR/adapt/N$n"
  materialise "$ODE_DIR/checkpoint_last.pt" "$base/zero-shot/eval-test/averaged.pt" \
    --encoder-steps "$n" --decoder-steps "$n"
  evaluate "$base/zero-shot"
  fine_tune "$base/full" "$n" transformer "$FT_LR"
  evaluate "$base/full"
  fine_tune "$base/lora" "$n" lora_transformer "$LORA_LR" \
    --lora-rank "$LORA_RANK" --lora-alpha "$LORA_ALPHA"
  materialise "$base/lora/checkpoint_last.pt" "$base/lora/eval-test/averaged.pt"
  evaluate "$base/lora"
done

# 4. The table.
python "$REPO_ROOT/examples/step_adaptation/table.py" --work-dir "$WORK_DIR" --steps "$STEPS" \
  --step-counts $STEP_COUNTS --ref "$WORK_DIR/raw/test.es" > "$WORK_DIR/results.md.tmp"
publish "$WORK_DIR/results.md.tmp" "$WORK_DIR/results.md"
cat "$WORK_DIR/results.md"
