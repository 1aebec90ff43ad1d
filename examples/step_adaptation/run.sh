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
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
TRANSLATION="$REPO_ROOT/examples/translation"
parse_options "$@" <<'EOF'
--work-dir=DIR        WORK_DIR        -         $REPO_ROOT/work-dirs/step-adaptation
--gpus=N              GPUS            gpus               # 0 = train on the CPU, N > 1 = data-parallel on N GPUs
                                                         # (default: 1 if CUDA is visible, else 0)
--steps=N             STEPS           positive  6        # training steps of both stacks = their layers L
--step-counts=LIST    STEP_COUNTS     positives 3 4 6 8 12  # step counts N' to adapt to, in quotes: "N' ..."
--max-update=N        MAX_UPDATE      positive  1200     # training updates of the ODE model
--lr=LR               LR              number    2e-3     # its peak learning rate
--warmup=N            WARMUP          positive  300      # its inverse-sqrt warmup
--ft-updates=N        FT_UPDATES      positive  100      # updates of each fine-tune
--ft-lr=LR            FT_LR           number    5e-4     # peak learning rate of full fine-tuning
--lora-lr=LR          LORA_LR         number    2e-3     # peak learning rate of LoRA fine-tuning
--ft-warmup=N         FT_WARMUP       positive  20       # warmup of both fine-tunes
--lora-rank=R         LORA_RANK       positive  8
--lora-alpha=A        LORA_ALPHA      number    16
--embed-dim=D         EMBED_DIM       positive  128      # model width
--ffn-dim=F           FFN_DIM         positive  512      # FFN width
--heads=H             HEADS           positive  4        # attention heads
--time-network=NAME   TIME_NETWORK    per-block|per-weight  per-weight  # per-block or per-weight (default: per-weight,
                                                         # as the official code)
--time-embed-dim=D    TIME_EMBED_DIM  positive  20       # d_e
--max-tokens=N        MAX_TOKENS      positive  2048     # tokens per batch in training and fine-tuning
--seed=N              SEED            positive  1
--train-pairs|--valid-pairs|--test-pairs|--vocab-size|--workers=N  PREPARE_ARGS[]  forward  --valid-pairs 500 --vocab-size 4000
                                                         # for prepare_bible.sh
EOF
use_project_python
GPUS="${GPUS:-$(default_gpus)}"
lock_dir "$WORK_DIR"

DATA_BIN="$WORK_DIR/data-bin"
ODE_DIR="$WORK_DIR/checkpoints/nonauto-N$STEPS"
width() {  # width LAYERS — the size options of a model with LAYERS layers per stack
  echo --encoder-embed-dim "$EMBED_DIM" --decoder-embed-dim "$EMBED_DIM" \
    --encoder-ffn-embed-dim "$FFN_DIM" --decoder-ffn-embed-dim "$FFN_DIM" \
    --encoder-attention-heads "$HEADS" --decoder-attention-heads "$HEADS" \
    --encoder-layers "$1" --decoder-layers "$1"
}
evaluate() {  # evaluate DIR — translate and score DIR/eval-test/averaged.pt (a plain transformer;
              # copied from DIR/checkpoint_last.pt, its one checkpoint, when missing)
  bible_test_scores "$WORK_DIR" "$1" "$GPUS" -- --max-len-a 1.5 --max-len-b 10
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
