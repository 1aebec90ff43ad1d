#!/usr/bin/env bash
# Train a GEC model with the ODE Transformer paper's CoNLL-14 recipe (Li et al. 2022): base 6-6,
# Adam (0.9, 0.98), lr 0.0015, inverse-sqrt schedule with 4000 warm-up updates, weight decay 1e-4,
# dropout 0.2, label-smoothed cross-entropy 0.1, shared embeddings (joined dictionary),
# update-freq 2, 55 epochs. These flags are the recipe's one definition; README.md cites them.
# Training resumes from SAVE_DIR/checkpoint_last.pt; SAVE_DIR/train.done marks a finished run.
#
# Usage: train.sh [options] [-- extra fairseq-train options, given last so they override the recipe]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
parse_options "$@" <<'EOF'
--work-dir=DIR        WORK_DIR     -         $REPO_ROOT/work-dirs/gec  # prepare.sh's work dir
--data-bin=DIR        DATA_BIN                          # binarised data (default: WORK_DIR/data-bin)
--arch=NAME           ARCH         -         ode_transformer_rk4  # ode_transformer_euler (residual) | ode_transformer_rk2_learned |
                                                        # ode_transformer_rk4, or any fairseq architecture
--save-dir=DIR        SAVE_DIR                          # checkpoints (default: WORK_DIR/checkpoints/ARCH)
--gpus=N              GPUS         gpus                 # 0 = train on the CPU, N > 1 = data-parallel on N GPUs
                                                        # (default: 1 if CUDA is visible, else 0)
--max-tokens=N        MAX_TOKENS   positive  4096       # tokens per device batch
--update-freq=N       UPDATE_FREQ  positive  2          # gradient accumulation
--max-epoch=N         MAX_EPOCH    positive  55
--max-update=N        MAX_UPDATE   whole     0          # stop after N updates (default: 0, no limit)
--seed=N              SEED         whole     1
--no-fp16             NO_FP16                           # train in fp32 (always so on the CPU)
--=OPTIONS            EXTRA[]                           # extra fairseq-train options
EOF
DATA_BIN="${DATA_BIN:-$WORK_DIR/data-bin}"
SAVE_DIR="${SAVE_DIR:-$WORK_DIR/checkpoints/$ARCH}"
start_training "$SAVE_DIR" "$ARCH" "$DATA_BIN/dict.src.txt" "run examples/gec/prepare.sh first (or pass --data-bin)"
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
  $(train_device_options "$GPUS" "$((1 - NO_FP16))") "${EXTRA[@]}"
