#!/usr/bin/env bash
# Quality study on the bundled English→Spanish Bible corpus: residual 6-6, RK2 with learned
# coefficients 6-6, RK4 6-6 (ODE blocks in the encoder, as in the paper) and a residual 24-6 model
# with the same layer evaluations as RK4 6-6, each trained with several seeds under one recipe,
# then averaged, decoded (beam 4) and scored; docs-ready table of mean ± standard deviation, with
# each seed's paired-bootstrap p-value against the residual 6-6 model of the same seed.
# Runs go in parallel, one thread each; finished stages are reused when the study is rerun.
#
# Usage: quality_study.sh [options]
#   --work-dir DIR        (default: work-dirs/quality-study)
#   --configs "A B ..."   of residual_6_6 rk2_learned_6_6 rk4_6_6 residual_24_6 (default: all four)
#   --seeds "1 2 3"       (default: 1 2 3)
#   --max-update N        updates per run (default: 800)
#   --max-tokens N        tokens per batch (default: 2048)
#   --lr LR --warmup N    inverse_sqrt peak and warmup (default: 2e-3, 300)
#   --embed-dim D         model width; FFN 4·D, D/32 heads (default: 128)
#   --save-interval-updates K   checkpoint spacing; the newest 5 are averaged (default: 50)
#   --train-pairs N --valid-pairs N --test-pairs N --vocab-size N --workers N   for prepare_bible.sh
#                         (default: the whole corpus, a vocabulary of 4000)
#   --jobs N              runs at a time, one intra-op thread each (default: nproc)
#   --output FILE         the Markdown table (default: WORK_DIR/results.md)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
HERE="$REPO_ROOT/examples/translation"

declare -A CONFIG_ARCH=(
  [residual_6_6]=ode_transformer_euler_small
  [rk2_learned_6_6]=ode_transformer_rk2_learned_small
  [rk4_6_6]=ode_transformer_rk4_small
  [residual_24_6]=ode_transformer_euler_small
)
declare -A CONFIG_ENCODER_LAYERS=([residual_6_6]=6 [rk2_learned_6_6]=6 [rk4_6_6]=6 [residual_24_6]=24)

WORK_DIR="$REPO_ROOT/work-dirs/quality-study"
CONFIGS="residual_6_6 rk2_learned_6_6 rk4_6_6 residual_24_6"
SEEDS="1 2 3"
MAX_UPDATE=800
MAX_TOKENS=2048
LR=2e-3
WARMUP=300
EMBED_DIM=128
SAVE_INTERVAL=50
PREPARE_ARGS=(--vocab-size 4000)
JOBS="$(nproc)"
OUTPUT=""
RUN=()

while [[ $# -gt 0 ]]; do
  case "$1" in
    --work-dir) require_option_value "$@"; WORK_DIR="$2"; shift 2 ;;
    --configs) require_option_value "$@"; CONFIGS="$2"; shift 2 ;;
    --seeds) require_option_value "$@"; SEEDS="$2"; shift 2 ;;
    --max-update) require_option_value "$@"; MAX_UPDATE="$2"; shift 2 ;;
    --max-tokens) require_option_value "$@"; MAX_TOKENS="$2"; shift 2 ;;
    --lr) require_option_value "$@"; LR="$2"; shift 2 ;;
    --warmup) require_option_value "$@"; WARMUP="$2"; shift 2 ;;
    --embed-dim) require_option_value "$@"; EMBED_DIM="$2"; shift 2 ;;
    --save-interval-updates) require_option_value "$@"; SAVE_INTERVAL="$2"; shift 2 ;;
    --train-pairs|--valid-pairs|--test-pairs|--vocab-size|--workers)
      require_option_value "$@"; PREPARE_ARGS+=("$1" "$2"); shift 2 ;;
    --jobs) require_option_value "$@"; JOBS="$2"; shift 2 ;;
    --output) require_option_value "$@"; OUTPUT="$2"; shift 2 ;;
    --run) [[ $# -ge 3 ]] || die "--run needs CONFIG SEED"; RUN=("$2" "$3"); shift 3 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d'; exit 0 ;;
    *) die "unknown option $1 (see --help)" ;;
  esac
done
for config in $CONFIGS; do
  [[ -n "${CONFIG_ARCH[$config]:-}" ]] \
    || die "unknown configuration '$config'; choose from: ${!CONFIG_ARCH[*]}"
done
for value in "$MAX_UPDATE" "$MAX_TOKENS" "$WARMUP" "$EMBED_DIM" "$SAVE_INTERVAL" "$JOBS" $SEEDS; do
  [[ "$value" =~ ^[1-9][0-9]*$ ]] || die "sizes, counts and seeds must be positive whole numbers, got '$value'"
done
(( MAX_UPDATE >= 5 * SAVE_INTERVAL )) || die "--max-update $MAX_UPDATE saves fewer than the 5 checkpoints \
that are averaged; give at least 5 × --save-interval-updates ($SAVE_INTERVAL) updates"
(( EMBED_DIM % 32 == 0 )) || die "--embed-dim must be a multiple of 32 (one head per 32 dimensions), got $EMBED_DIM"
OUTPUT="${OUTPUT:-$WORK_DIR/results.md}"
RECIPE="max_update=$MAX_UPDATE max_tokens=$MAX_TOKENS lr=$LR warmup=$WARMUP embed_dim=$EMBED_DIM"

run_one() {  # run_one CONFIG SEED — train, average the newest 5 checkpoints, decode, score
  local config="$1" seed="$2"
  local save_dir="$WORK_DIR/runs/$config/seed$seed"
  check_run_config "$save_dir" "$RECIPE"
  OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 "$HERE/train_bible.sh" --data-bin "$WORK_DIR/data-bin" \
    --save-dir "$save_dir" --arch "${CONFIG_ARCH[$config]}" --minutes 0 --max-update "$MAX_UPDATE" \
    --max-tokens "$MAX_TOKENS" --lr "$LR" --warmup "$WARMUP" --seed "$seed" \
    --save-interval-updates "$SAVE_INTERVAL" \
    -- --encoder-layers "${CONFIG_ENCODER_LAYERS[$config]}" --decoder-layers 6 \
    --encoder-embed-dim "$EMBED_DIM" --decoder-embed-dim "$EMBED_DIM" \
    --encoder-ffn-embed-dim "$((4 * EMBED_DIM))" --decoder-ffn-embed-dim "$((4 * EMBED_DIM))" \
    --encoder-attention-heads "$((EMBED_DIM / 32))" --decoder-attention-heads "$((EMBED_DIM / 32))" \
    > "$save_dir/train.stdout" 2>&1 || die "training $config seed $seed failed; see $save_dir/train.log"
  OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 "$HERE/evaluate.sh" --data-bin "$WORK_DIR/data-bin" \
    --checkpoint-dir "$save_dir" --ref "$WORK_DIR/raw/test.es" --lang es \
    --average-last 5 --checkpoint-kind update -- --max-len-a 1.5 --max-len-b 10 > /dev/null
  log "finished $config seed $seed"
}

if [[ ${#RUN[@]} -gt 0 ]]; then
  run_one "${RUN[@]}"
  exit 0
fi

"$HERE/prepare_bible.sh" --work-dir "$WORK_DIR" "${PREPARE_ARGS[@]}"
# Seed-major order, most expensive configuration first: an interrupted study stays balanced
# across configurations, and the short runs fill the gaps at the end.
for seed in $SEEDS; do
  for config in residual_24_6 rk4_6_6 rk2_learned_6_6 residual_6_6; do
    if [[ " $CONFIGS " == *" $config "* ]]; then printf '%s %s\n' "$config" "$seed"; fi
  done
done | xargs -P "$JOBS" -n 2 "$0" --work-dir "$WORK_DIR" --max-update "$MAX_UPDATE" \
  --max-tokens "$MAX_TOKENS" --lr "$LR" --warmup "$WARMUP" --embed-dim "$EMBED_DIM" \
  --save-interval-updates "$SAVE_INTERVAL" --run \
  || die "some runs failed (messages above); rerun to resume"

python "$HERE/study_table.py" --runs-dir "$WORK_DIR/runs" --configs $CONFIGS --recipe "$RECIPE" \
  --ref "$WORK_DIR/raw/test.es" --lang es > "$OUTPUT.tmp" || { rm -f "$OUTPUT.tmp"; die "could not summarise the runs"; }
publish "$OUTPUT.tmp" "$OUTPUT"
cat "$OUTPUT"
