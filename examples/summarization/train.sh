#!/usr/bin/env bash
# Train a base 6-6 ODE Transformer on CNN/DailyMail with the paper's recipe (recipe.sh). The
# paper's effective batch, 8 GPUs × 4096 tokens × update-freq 4 = 131072 tokens per update, is kept
# for any device count: update-freq = ceil(131072 / (devices × max-tokens)).
# Skipped when SAVE_DIR/train.done exists; an interrupted run resumes from checkpoint_last.pt.
#
# Usage: train.sh [options] [-- extra fairseq-train options]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
# shellcheck source=recipe.sh
source "$REPO_ROOT/examples/summarization/recipe.sh"
parse_options "$@" <<'EOF'
--work-dir=DIR        WORK_DIR     -         $REPO_ROOT/work-dirs/cnndm  # prepare.sh's work dir; data in WORK_DIR/bin
--method=M            METHOD       keys:CNNDM_ARCH_OF_METHOD  rk4  # residual | rk2-learned | rk4: the paper's rows
--arch=NAME           ARCH                              # fairseq architecture (default: the method's)
--save-dir=DIR        SAVE_DIR                          # checkpoints (default: WORK_DIR/checkpoints/METHOD)
--gpus=N              GPUS         gpus                 # 0 = train on the CPU, N > 1 = data-parallel on N GPUs
                                                        # (default: 1 if CUDA is visible, else 0; the paper used 8)
--max-tokens=N        MAX_TOKENS   positive  $CNNDM_MAX_TOKENS  # tokens per device batch
--update-freq=N       UPDATE_FREQ  positive             # gradient accumulation (default: the paper's effective batch, above)
--max-epoch=N         MAX_EPOCH    positive  $CNNDM_MAX_EPOCH
--max-update=N        MAX_UPDATE   whole     0          # stop after N updates (default: 0, no limit)
--no-fp16             NO_FP16                           # train in fp32 (always so on the CPU)
--seed=N              SEED         whole     1
--=OPTIONS            EXTRA[]                           # extra fairseq-train options
EOF
ARCH="${ARCH:-${CNNDM_ARCH_OF_METHOD[$METHOD]}}"
SAVE_DIR="${SAVE_DIR:-$WORK_DIR/checkpoints/$METHOD}"
start_training "$SAVE_DIR" "$ARCH" "$WORK_DIR/bin/dict.source.txt" \
  "run examples/summarization/prepare.sh --work-dir $WORK_DIR first"
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
  --log-format simple $(train_device_options "$GPUS" "$((1 - NO_FP16))") "${EXTRA[@]}"
