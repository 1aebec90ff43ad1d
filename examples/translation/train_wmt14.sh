#!/usr/bin/env bash
# Train one of the ODE Transformer paper's WMT14 configurations (Li et al., ACL 2022).
# The recipe table below is the single place that holds the published hyperparameters.
# The effective batch of the paper, 4096 tokens × 8 GPUs × PAPER_UPDATE_FREQ per update, is kept
# for any GPU count and --max-tokens: update-freq = ceil(4096·8·PAPER_UPDATE_FREQ / (gpus·max-tokens)).
# fairseq resumes from SAVE_DIR/checkpoint_last.pt; SAVE_DIR/train.done marks a finished run.
#
# Usage: train_wmt14.sh --recipe NAME [options] [-- extra fairseq-train options]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"

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

parse_options "$@" <<'EOF'
--recipe=NAME         RECIPE       keys:RECIPE_ARCH  required  # base-residual | base-rk2-learned | base-rk4 | big-residual |
                                                               # big-rk2-learned | big-e12-residual-rpr | big-e12-rk2-learned-rpr
--pair=en-de|en-fr    PAIR         en-de|en-fr   en-de         # selects the paper's update-freq
--work-dir=DIR        WORK_DIR                                 # prepare_wmt14.sh's work dir (default: work-dirs/wmt14-PAIR)
--data-bin=DIR        DATA_BIN                                 # (default: WORK_DIR/data-bin)
--save-dir=DIR        SAVE_DIR                                 # (default: WORK_DIR/checkpoints/RECIPE)
--arch=NAME           ARCH                                     # (default: the recipe's architecture)
--gpus=N              GPUS         gpus                        # 0 = train on the CPU, N > 1 = data-parallel on N GPUs
                                                               # (default: 1 if CUDA is visible, else 0; the paper used 8)
--max-tokens=N        MAX_TOKENS   positive      4096          # tokens per GPU per batch
--update-freq=N       UPDATE_FREQ  positive                    # override the computed value (changes the effective batch)
--max-epoch=N         MAX_EPOCH    positive      $MAX_EPOCH_DEFAULT  # (default: the recipe's)
--max-update=N        MAX_UPDATE   whole         0             # stop after N updates (default: 0, no limit)
--no-fp16             NO_FP16                                  # train in fp32 (always so on the CPU)
--dry-run             DRY_RUN                                  # print the fairseq-train command and exit
--=OPTIONS            EXTRA[]                                  # extra fairseq-train options
EOF
use_project_python
GPUS="${GPUS:-$(default_gpus)}"
WORK_DIR="${WORK_DIR:-$REPO_ROOT/work-dirs/wmt14-$PAIR}"
DATA_BIN="${DATA_BIN:-$WORK_DIR/data-bin}"
SAVE_DIR="${SAVE_DIR:-$WORK_DIR/checkpoints/$RECIPE}"
ARCH="${ARCH:-${RECIPE_ARCH[$RECIPE]}}"
DEVICES=$(( GPUS > 0 ? GPUS : 1 ))
PAPER_TOKENS=$((PAPER_TOKENS_PER_GPU * PAPER_GPUS * ${PAPER_UPDATE_FREQ[$PAIR]}))
if [[ -z "$UPDATE_FREQ" ]]; then
  UPDATE_FREQ=$(( (PAPER_TOKENS + DEVICES * MAX_TOKENS - 1) / (DEVICES * MAX_TOKENS) ))
fi
EFFECTIVE_TOKENS=$((DEVICES * MAX_TOKENS * UPDATE_FREQ))
log "recipe $RECIPE ($PAIR): $ARCH, $DEVICES device(s) × $MAX_TOKENS tokens × update-freq" \
  "$UPDATE_FREQ = $EFFECTIVE_TOKENS tokens per update (paper: $PAPER_TOKENS)"
[[ "$EFFECTIVE_TOKENS" -eq "$PAPER_TOKENS" ]] \
  || log "warning: the effective batch differs from the paper's by $EFFECTIVE_TOKENS/$PAPER_TOKENS"

COMMAND=(fairseq-train "$DATA_BIN" --user-dir "$REPO_ROOT/user_dir" --arch "$ARCH"
  --share-all-embeddings
  --optimizer adam --adam-betas "$ADAM_BETAS" --clip-norm 0.0
  --lr "$LR" --lr-scheduler inverse_sqrt --warmup-updates "$WARMUP" --warmup-init-lr "$WARMUP_INIT_LR"
  --criterion label_smoothed_cross_entropy --label-smoothing "$LABEL_SMOOTHING"
  --max-tokens "$MAX_TOKENS" --update-freq "$UPDATE_FREQ" $(train_device_options "$GPUS" "$((1 - NO_FP16))")
  --max-epoch "$MAX_EPOCH" --max-update "$MAX_UPDATE" --keep-last-epochs 5 --save-dir "$SAVE_DIR"
  --log-format simple --log-interval 100 "${EXTRA[@]}")
if [[ "$DRY_RUN" -eq 1 ]]; then
  printf '%q ' "${COMMAND[@]}"
  echo
  exit 0
fi
require_file "$DATA_BIN/dict.en.txt" "run examples/translation/prepare_wmt14.sh first"
lock_dir "$SAVE_DIR"
run_stage "$SAVE_DIR/train.done" "training $RECIPE" || exit 0
run_training "$SAVE_DIR" "${COMMAND[@]}"
