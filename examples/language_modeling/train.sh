#!/usr/bin/env bash
# Train a language model (fairseq-train --task language_modeling) on prepare.sh's data with one of
# two recipes; every value below is a default that an option overrides:
#   bible: 2 layers, d = 128, FFN 512, 2 heads, tied input and output embeddings; blocks of 128
#     tokens across verse ends, 4096 tokens per update; Adam (0.9, 0.98), lr 2e-3 after 200 warmup
#     updates, inverse square-root decay, weight decay 0.01, dropout 0.1; one validation per epoch,
#     stopped after 5 epochs without a better validation loss or after 40 epochs.
#   wikitext-103: fairseq's transformer_lm recipe for WikiText-103 (the architecture's own size,
#     tied embeddings; blocks of 512 tokens, 2048 tokens × update-freq 16 per GPU, lr 5e-4 after
#     4000 warmup updates, inverse square-root decay, weight decay 0.01, dropout 0.1, fp16,
#     50,000 updates).
# With --adaptive CUTOFFS the word embeddings and the softmax are adaptive (Baevski & Auli, 2019; the
# wikitext-103 architectures' `_wiki103` form): the words past each cutoff (by frequency) get a 4×
# narrower embedding, input and output tied, so the vocabulary costs a fraction of its full size.
# An adaptive softmax (--adaptive, a `_wiki103` architecture or --adaptive-softmax-cutoff) trains
# with fairseq's adaptive_loss, under --ddp-backend legacy_ddp, which that loss requires.
# The run keeps checkpoint_best.pt (lowest validation loss) and checkpoint_last.pt; an interrupted
# run resumes from checkpoint_last.pt; SAVE_DIR/train.done marks a finished run, which is then
# skipped. A save dir refuses a rerun with another recipe (the budget options may change).
#
# Usage: train.sh [options] [-- extra fairseq-train options, given last so they override the recipe]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
parse_options "$@" <<'EOF'
--recipe=NAME         RECIPE        bible|wikitext-103  bible  # bible (CPU) or wikitext-103 (GPUs)
--work-dir=DIR        WORK_DIR                          # prepare.sh's work dir (default: work-dirs/lm-RECIPE under the repo root)
--data-bin=DIR        DATA_BIN                          # binarised data (default: WORK_DIR/data-bin)
--arch=NAME           ARCH          -         ode_transformer_lm_rk2_learned  # any language model (the bible recipe sets its size): ode_transformer_lm_euler,
                                                        # ode_transformer_lm_rk4, fairseq's transformer_lm, … (docs/architectures.md)
--save-dir=DIR        SAVE_DIR                          # checkpoints (default: WORK_DIR/checkpoints/ARCH)
--gpus=N              GPUS          gpus                # 0 = train on the CPU, N > 1 = data-parallel on N GPUs
                                                        # (default: 1 if CUDA is visible, else 0)
--max-update=N        MAX_UPDATE    whole               # stop after N updates (default: bible 0 = no limit, wikitext-103 50000)
--max-epoch=N         MAX_EPOCH     whole               # stop after N epochs (default: bible 40, wikitext-103 0 = no limit)
--patience=N          PATIENCE      whole               # stop after N validations without a better loss (default: bible 5,
                                                        # wikitext-103 0 = never)
--schedule=KIND       SCHEDULE      inverse-sqrt|linear  inverse-sqrt  # after the warmup: lr ∝ 1/√update, or linear decay to 0
                                                        # at --max-update
--lr=LR               LR            number              # peak learning rate (default: bible 2e-3, wikitext-103 5e-4)
--warmup=N            WARMUP        whole               # warmup updates (default: bible 200, wikitext-103 4000)
--max-tokens=N        MAX_TOKENS    positive            # tokens per device batch (default: bible 4096, wikitext-103 2048)
--update-freq=N       UPDATE_FREQ   positive            # batches per update (default: bible 1, wikitext-103 16)
--tokens-per-sample=N TOKENS_PER_SAMPLE  positive       # tokens per block (default: bible 128, wikitext-103 512)
--dropout=P           DROPOUT       number    0.1       #
--seed=N              SEED          whole     1         #
--adaptive=CUTOFFS    ADAPTIVE                          # adaptive input and softmax, tied, with these cutoffs, e.g. 2000,5000 (see above)
--no-fp16             NO_FP16                           # train in fp32 on GPUs too (the CPU always does)
--count-flops=FILE    COUNT_FLOPS                       # instead of training: the counted FLOPs per token of the run's first
                                                        # batch (ode-seq flops: training, forward and backward; inference) into FILE
--=OPTIONS            EXTRA[]                           # extra fairseq-train options
EOF
case "$RECIPE" in
  bible)
    MODEL=(--decoder-layers 2 --decoder-embed-dim 128 --decoder-ffn-embed-dim 512 --decoder-attention-heads 2
           --decoder-input-dim 128 --decoder-output-dim 128)
    DEFAULTS=(0 40 5 2e-3 200 4096 1 128)
    FP16=0 ;;
  wikitext-103)
    MODEL=()
    DEFAULTS=(50000 0 0 5e-4 4000 2048 16 512)
    FP16=$((1 - NO_FP16)) ;;
esac
read -r MAX_UPDATE MAX_EPOCH PATIENCE LR WARMUP MAX_TOKENS UPDATE_FREQ TOKENS_PER_SAMPLE <<< "\
${MAX_UPDATE:-${DEFAULTS[0]}} ${MAX_EPOCH:-${DEFAULTS[1]}} ${PATIENCE:-${DEFAULTS[2]}} ${LR:-${DEFAULTS[3]}} \
${WARMUP:-${DEFAULTS[4]}} ${MAX_TOKENS:-${DEFAULTS[5]}} ${UPDATE_FREQ:-${DEFAULTS[6]}} ${TOKENS_PER_SAMPLE:-${DEFAULTS[7]}}"
[[ "$MAX_UPDATE" -gt 0 || "$MAX_EPOCH" -gt 0 ]] || usage_error "give a budget: --max-update N and/or --max-epoch N"
[[ "$SCHEDULE" == inverse-sqrt || "$MAX_UPDATE" -gt "$WARMUP" ]] \
  || usage_error "--schedule linear decays to 0 at --max-update, which must exceed --warmup ($WARMUP)"
[[ -z "$ADAPTIVE" || "$ADAPTIVE" =~ ^[1-9][0-9]*(,[1-9][0-9]*)*$ ]] \
  || usage_error "--adaptive takes increasing word counts separated by commas, such as 2000,5000, got '$ADAPTIVE'"
WORK_DIR="${WORK_DIR:-$REPO_ROOT/work-dirs/lm-$RECIPE}"
DATA_BIN="${DATA_BIN:-$WORK_DIR/data-bin}"
SAVE_DIR="${SAVE_DIR:-$WORK_DIR/checkpoints/$ARCH}"
use_project_python
require_file "$DATA_BIN/dict.txt" "run examples/language_modeling/prepare.sh --corpus $RECIPE first (or pass --data-bin)"
OUTPUT_LAYER=()
if [[ -n "$ADAPTIVE" ]]; then
  IFS=, read -r -a cutoffs <<< "$ADAPTIVE"
  VOCAB=$(( $(wc -l < "$DATA_BIN/dict.txt") + 4 ))  # fairseq's dictionary adds 4 special symbols
  previous=0
  for cutoff in "${cutoffs[@]}"; do
    (( cutoff > previous && cutoff < VOCAB )) || usage_error "--adaptive $ADAPTIVE: the cutoffs must \
increase and stay below the vocabulary's $VOCAB words (with fairseq's 4 special symbols)"
    previous=$cutoff
  done
  OUTPUT_LAYER=(--adaptive-input --adaptive-input-cutoff "$ADAPTIVE" --adaptive-input-factor 4
    --adaptive-softmax-cutoff "$ADAPTIVE" --adaptive-softmax-factor 4 --tie-adaptive-weights --tie-adaptive-proj)
fi
if [[ -n "$ADAPTIVE" || "$ARCH" == *_wiki103 || " ${EXTRA[*]} " == *" --adaptive-softmax-cutoff "* ]]; then
  OUTPUT_LAYER+=(--criterion adaptive_loss --ddp-backend legacy_ddp)
fi
GPUS="${GPUS:-$(default_gpus)}"
if [[ "$SCHEDULE" == linear ]]; then
  SCHEDULER=(--lr-scheduler polynomial_decay --total-num-update "$MAX_UPDATE" --end-learning-rate 0)
else
  SCHEDULER=(--lr-scheduler inverse_sqrt --warmup-init-lr 1e-07)
fi
LOADING=()
[[ "$GPUS" -gt 0 ]] || LOADING=(--num-workers 0)  # no loader process beside the training on a CPU
RECIPE_OPTIONS=(--arch "$ARCH" "${MODEL[@]}" --decoder-normalize-before --share-decoder-input-output-embed
  --tokens-per-sample "$TOKENS_PER_SAMPLE" --sample-break-mode none --max-tokens "$MAX_TOKENS"
  --update-freq "$UPDATE_FREQ" --optimizer adam --adam-betas '(0.9, 0.98)' --weight-decay 0.01 --clip-norm 0.0
  --lr "$LR" --warmup-updates "$WARMUP" "${SCHEDULER[@]}" --dropout "$DROPOUT" --seed "$SEED" "${OUTPUT_LAYER[@]}"
  $(train_device_options "$GPUS" "$FP16"))
if [[ -n "$COUNT_FLOPS" ]]; then
  count_flops "$COUNT_FLOPS" "$DATA_BIN" --task language_modeling "${RECIPE_OPTIONS[@]}" "${EXTRA[@]}"
  exit 0
fi
lock_dir "$SAVE_DIR"
run_stage "$SAVE_DIR/train.done" "training $ARCH" || exit 0
DATA_ID="$(data_bin_id "$DATA_BIN" train)"
check_run_config "$SAVE_DIR" "data-bin=$DATA_ID ${RECIPE_OPTIONS[*]} extra=${EXTRA[*]}"

# One progress line per 50 updates (per tenth of a shorter budget).
LOG_INTERVAL=50
[[ "$MAX_UPDATE" -gt 0 && "$MAX_UPDATE" -lt 500 ]] && LOG_INTERVAL=$(( MAX_UPDATE >= 10 ? MAX_UPDATE / 10 : 1 ))
mkdir -p "$SAVE_DIR"
fairseq-train "$DATA_BIN" --task language_modeling --user-dir "$REPO_ROOT/user_dir" "${RECIPE_OPTIONS[@]}" \
  --max-update "$MAX_UPDATE" --max-epoch "$MAX_EPOCH" --patience "$PATIENCE" --save-dir "$SAVE_DIR" \
  --no-epoch-checkpoints "${LOADING[@]}" --log-format simple --log-interval "$LOG_INTERVAL" "${EXTRA[@]}" 2>&1 | python "$REPO_ROOT/examples/translation/train_progress.py" --max-update "$MAX_UPDATE" --log "$SAVE_DIR/train.log" \
  || die "fairseq-train failed (its last lines are above; the whole log: $SAVE_DIR/train.log)"
require_file "$SAVE_DIR/checkpoint_last.pt" "fairseq-train stopped before saving; see $SAVE_DIR/train.log"
touch "$SAVE_DIR/train.done"
