#!/usr/bin/env bash
# Train a GEC model with the ODE Transformer paper's CoNLL-14 recipe (Li et al. 2022): base 6-6,
# Adam (0.9, 0.98), lr 0.0015, inverse-sqrt schedule with 4000 warm-up updates, weight decay 1e-4,
# dropout 0.2, label-smoothed cross-entropy 0.1, shared embeddings (joined dictionary),
# update-freq 2, 55 epochs. These flags are the recipe's one definition; README.md cites them.
#
# Environment variables (defaults in brackets):
#   ARCH         ode_transformer_euler (residual) | ode_transformer_rk2_learned | ode_transformer_rk4
#                (any fairseq architecture works, e.g. transformer) [ode_transformer_rk4]
#   DATA_BIN     binarised data from prepare.sh [work-dirs/gec/data-bin]
#   SAVE_DIR     checkpoints [runs/gec/$ARCH]
#   GPUS         number of GPUs (distributed world size) [1]; CPU=1 trains on the CPU instead
#   MAX_TOKENS   tokens per GPU batch [4096]     UPDATE_FREQ  gradient accumulation [2]
#   MAX_EPOCH    [55]    MAX_UPDATE  stop after this many updates, 0 = no limit [0]
#   SEED [1]     FP16  1 = mixed precision (GPU only) [1]
#   EXTRA_ARGS   more fairseq-train flags, given last so they override the recipe (word-split) [""]
# Training resumes from SAVE_DIR/checkpoint_last.pt; SAVE_DIR/train.done marks a finished run.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
ARCH=${ARCH:-ode_transformer_rk4}
DATA_BIN=${DATA_BIN:-$ROOT/work-dirs/gec/data-bin}
SAVE_DIR=${SAVE_DIR:-$ROOT/runs/gec/$ARCH}
GPUS=${GPUS:-1}
CPU=${CPU:-0}
MAX_TOKENS=${MAX_TOKENS:-4096}
UPDATE_FREQ=${UPDATE_FREQ:-2}
MAX_EPOCH=${MAX_EPOCH:-55}
MAX_UPDATE=${MAX_UPDATE:-0}
SEED=${SEED:-1}
FP16=${FP16:-1}
EXTRA_ARGS=${EXTRA_ARGS:-}

fail() { echo "train.sh: error: $*" >&2; exit 1; }
[ -f "$DATA_BIN/dict.src.txt" ] || fail "$DATA_BIN has no dict.src.txt: run examples/gec/prepare.sh or set DATA_BIN"
command -v fairseq-train >/dev/null || fail "fairseq-train not found: install fairseq 0.12"
if [ -f "$SAVE_DIR/train.done" ]; then
  echo "train.sh: $SAVE_DIR/train.done exists: skipping training" >&2
  exit 0
fi

device=(--distributed-world-size "$GPUS")
[ "$FP16" = 1 ] && device+=(--fp16)
[ "$CPU" = 1 ] && device=(--cpu)

# shellcheck disable=SC2086  # EXTRA_ARGS is a list of flags
fairseq-train "$DATA_BIN" --user-dir "$ROOT/user_dir" \
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
  "${device[@]}" $EXTRA_ARGS
touch "$SAVE_DIR/train.done"
