#!/usr/bin/env bash
# Train a small translation model on the prepared Bible data for a fixed time (or update) budget.
# fairseq resumes from SAVE_DIR/checkpoint_last.pt when a run was interrupted; SAVE_DIR/train.done
# marks a finished run, which is then skipped.
#
# Usage: train_bible.sh [options] [-- extra fairseq-train options]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
parse_options "$@" <<'EOF'
--work-dir=DIR        WORK_DIR      -         $REPO_ROOT/work-dirs/bible-en-es
--data-bin=DIR        DATA_BIN                           # (default: WORK_DIR/data-bin)
--save-dir=DIR        SAVE_DIR                           # (default: WORK_DIR/checkpoints/ARCH)
--arch=NAME           ARCH          -         ode_transformer_rk4_small
--gpus=N              GPUS          gpus                 # 0 = train on the CPU, N > 1 = data-parallel on N GPUs
                                                         # (default: 1 if CUDA is visible, else 0)
--minutes=M           MINUTES       number    12         # stop after M minutes of training, fairseq --stop-time-hours
--max-update=N        MAX_UPDATE    whole     0          # stop after N updates instead (0 = no limit)
--max-tokens=N        MAX_TOKENS    positive  2048       # tokens per batch
--lr=LR               LR            number    1e-3       # peak learning rate of inverse_sqrt
--warmup=N            WARMUP        whole     200        # its warmup updates
--save-interval-updates=N  SAVE_INTERVAL_UPDATES  positive  50  # checkpoint every N updates, the last 5 are kept
--seed=N              SEED          whole     1
--expected-ups=U      EXPECTED_UPS  number               # updates/s this setting reaches on an idle 2-core machine: progress lines
                                                         # state it and warn early when this machine is much slower (default: none)
--count-flops=FILE    COUNT_FLOPS                        # instead of training: the counted FLOPs per target token of the run's first
                                                         # batch (ode-seq flops: training, forward and backward; inference) into FILE
--=OPTIONS            EXTRA[]                            # passed to fairseq-train (e.g. smaller sizes: --encoder-embed-dim 32)
EOF
DATA_BIN="${DATA_BIN:-$WORK_DIR/data-bin}"
SAVE_DIR="${SAVE_DIR:-$WORK_DIR/checkpoints/$ARCH}"
[[ "$MAX_UPDATE" -gt 0 || ! "$MINUTES" =~ ^0*([.]0*)?([eE][-+]?[0-9]+)?$ ]] \
  || usage_error "give a budget: --minutes M and/or --max-update N"
use_project_python
GPUS="${GPUS:-$(default_gpus)}"
# Pre-norm model, shared embeddings (joined dictionary), label-smoothed cross-entropy, Adam with
# inverse square-root decay: the paper's recipe scaled to a CPU. A 12-minute run on two cores makes
# only a few hundred updates, so batches are small (more updates for the same compute) and the
# warmup short (pre-norm Transformers train stably without a long one).
RECIPE=(--user-dir "$REPO_ROOT/user_dir" --arch "$ARCH" --share-all-embeddings --dropout 0.1
  --optimizer adam --adam-betas '(0.9, 0.98)' --clip-norm 0.0
  --lr "$LR" --lr-scheduler inverse_sqrt --warmup-updates "$WARMUP" --warmup-init-lr 1e-07
  --criterion label_smoothed_cross_entropy --label-smoothing 0.1 --max-tokens "$MAX_TOKENS" --seed "$SEED"
  $(train_device_options "$GPUS"))
if [[ -n "$COUNT_FLOPS" ]]; then
  count_flops "$COUNT_FLOPS" "$DATA_BIN" "${RECIPE[@]}" "${EXTRA[@]}"
  exit 0
fi
start_training "$SAVE_DIR" "$ARCH" "$DATA_BIN/dict.en.txt" \
  "run examples/translation/prepare_bible.sh first (or pass --data-bin)"
STOP_HOURS="$(python -c "import sys; print(float(sys.argv[1]) / 60)" "$MINUTES")"
BUDGET=()
[[ "$MAX_UPDATE" -gt 0 ]] && BUDGET+=(--max-update "$MAX_UPDATE")
[[ "$STOP_HOURS" != "0.0" ]] && BUDGET+=(--stop-time-hours "$STOP_HOURS")

# One progress line per 10 updates (per tenth of a shorter budget).
LOG_INTERVAL=10
[[ "$MAX_UPDATE" -gt 0 && "$MAX_UPDATE" -lt 100 ]] && LOG_INTERVAL=$(( MAX_UPDATE >= 10 ? MAX_UPDATE / 10 : 1 ))

# fairseq's full output goes to train.log; the terminal gets progress lines with the time left.
PROGRESS=(python "$REPO_ROOT/examples/translation/train_progress.py" --max-update "$MAX_UPDATE"
          --log "$SAVE_DIR/train.log")
[[ -z "$EXPECTED_UPS" ]] || PROGRESS+=(--expected-ups "$EXPECTED_UPS")

fairseq-train "$DATA_BIN" "${RECIPE[@]}" "${BUDGET[@]}" \
  --save-dir "$SAVE_DIR" --save-interval-updates "$SAVE_INTERVAL_UPDATES" --keep-interval-updates 5 \
  --no-epoch-checkpoints --log-format simple --log-interval "$LOG_INTERVAL" "${EXTRA[@]}" 2>&1 | "${PROGRESS[@]}" \
  || die "fairseq-train failed (its last lines are above; the whole log: $SAVE_DIR/train.log)"

require_file "$SAVE_DIR/checkpoint_last.pt" "fairseq-train stopped before saving; see $SAVE_DIR/train.log"
touch "$SAVE_DIR/train.done"
