#!/usr/bin/env bash
# Train a base 6-6 ODE Transformer on CNN/DailyMail with the paper's recipe (recipe.sh).
#
# Parameters (environment variables, defaults in brackets); extra arguments go to fairseq-train:
#   DATA_DIR     prepared data (prepare.sh), uses DATA_DIR/bin          [data/cnndm]
#   METHOD       residual | rk2-learned | rk4                           [rk4]
#   ARCH         fairseq architecture                                   [from METHOD]
#   SAVE_DIR     checkpoints                                            [checkpoints/cnndm-METHOD]
#   GPUS         GPU count; 0 trains on the CPU                         [8]
#   MAX_TOKENS   tokens per GPU batch                                   [4096]
#   UPDATE_FREQ  gradient accumulation                                  [ceil(131072 / (GPUS*MAX_TOKENS))]
#   MAX_EPOCH    epochs                                                 [20]
#   FP16         1 trains in mixed precision (GPU only)                 [1 if GPUS > 0]
#   SEED         random seed                                            [1]
#   PYTHON       interpreter with fairseq                               [python]
# Skipped when SAVE_DIR/train.done exists; an interrupted run resumes from checkpoint_last.pt.
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_ROOT="$(cd "$SCRIPT_DIR/../.." && pwd)"
# shellcheck source=recipe.sh
source "$SCRIPT_DIR/recipe.sh"

fail() { echo "train.sh: error: $*" >&2; exit 2; }

DATA_DIR="${DATA_DIR:-data/cnndm}"
METHOD="${METHOD:-rk4}"
[[ -n "${CNNDM_ARCH_OF_METHOD[$METHOD]+set}" ]] || fail "METHOD=$METHOD; use one of: ${!CNNDM_ARCH_OF_METHOD[*]}"
ARCH="${ARCH:-${CNNDM_ARCH_OF_METHOD[$METHOD]}}"
SAVE_DIR="${SAVE_DIR:-checkpoints/cnndm-$METHOD}"
GPUS="${GPUS:-$CNNDM_GPUS}"
MAX_TOKENS="${MAX_TOKENS:-$CNNDM_MAX_TOKENS}"
devices=$((GPUS > 0 ? GPUS : 1))
UPDATE_FREQ="${UPDATE_FREQ:-$(((CNNDM_TOKENS_PER_UPDATE + devices * MAX_TOKENS - 1) / (devices * MAX_TOKENS)))}"
MAX_EPOCH="${MAX_EPOCH:-$CNNDM_MAX_EPOCH}"
FP16="${FP16:-$((GPUS > 0 ? 1 : 0))}"
SEED="${SEED:-1}"
PYTHON="${PYTHON:-python}"

[[ -f "$DATA_DIR/bin/dict.source.txt" ]] || fail "no binarised data in $DATA_DIR/bin; run prepare.sh with DATA_DIR=$DATA_DIR first"
if [[ -f "$SAVE_DIR/train.done" ]]; then
  echo "train.sh: $SAVE_DIR/train.done exists; skipping"
  exit 0
fi

device_args=(--distributed-world-size "$GPUS")
((GPUS == 0)) && device_args=(--cpu)
((FP16 == 1)) && device_args+=(--fp16)
effective=$((devices * MAX_TOKENS * UPDATE_FREQ))
echo "train.sh: $ARCH, $devices device(s) x $MAX_TOKENS tokens x update-freq $UPDATE_FREQ = $effective tokens/update (paper: $CNNDM_TOKENS_PER_UPDATE)"

mkdir -p "$SAVE_DIR"
"$PYTHON" -m fairseq_cli.train "$DATA_DIR/bin" \
  --user-dir "$REPO_ROOT/user_dir" --task translation --source-lang source --target-lang target \
  --arch "$ARCH" --share-all-embeddings \
  --optimizer adam --adam-betas "$CNNDM_ADAM_BETAS" \
  --lr "$CNNDM_LR" --lr-scheduler inverse_sqrt --warmup-updates "$CNNDM_WARMUP_UPDATES" \
  --warmup-init-lr "$CNNDM_WARMUP_INIT_LR" --weight-decay "$CNNDM_WEIGHT_DECAY" \
  --criterion label_smoothed_cross_entropy --label-smoothing "$CNNDM_LABEL_SMOOTHING" \
  --max-tokens "$MAX_TOKENS" --update-freq "$UPDATE_FREQ" --max-epoch "$MAX_EPOCH" \
  --save-dir "$SAVE_DIR" --keep-last-epochs 5 --seed "$SEED" --log-format simple \
  "${device_args[@]}" "$@"
touch "$SAVE_DIR/train.done"
