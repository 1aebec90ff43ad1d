#!/usr/bin/env bash
# The sweep that chose the demo's setting: each setting is one whole run_bible_demo.sh (prepare,
# train a fixed number of updates, average, beam search, score) in its own work directory, timed;
# the table lists updates, CPU and wall minutes, training speed and test BLEU.
#
# Usage: demo_sweep.sh [options]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
HERE="$REPO_ROOT/examples/translation"

# name → run_bible_demo.sh options (architecture, width, depth, vocabulary, batch, learning rate,
# warmup, dropout), trained on the CPU. Update budgets give every setting about 8 CPU-minutes of training at one
# thread (measured per update beforehand); the table reports what each run really took.
D128="--encoder-embed-dim 128 --decoder-embed-dim 128 --encoder-ffn-embed-dim 512 --decoder-ffn-embed-dim 512"
declare -A SETTING=(
  [rk4_d256_v8k_b2k_lr1e-3]="--arch ode_transformer_rk4_small --vocab-size 8000 --max-tokens 2048 --lr 1e-3 --warmup 200 --max-update 230"
  [rk2l_d256_v4k_b2k_lr2e-3]="--arch ode_transformer_rk2_learned_small --vocab-size 4000 --max-tokens 2048 --lr 2e-3 --warmup 300 --max-update 380"
  [rk2l_d128_v4k_b2k_lr2e-3]="--arch ode_transformer_rk2_learned_small --vocab-size 4000 --max-tokens 2048 --lr 2e-3 --warmup 300 --max-update 870 -- $D128"
  [rk2l_d128_v4k_b2k_lr3e-3]="--arch ode_transformer_rk2_learned_small --vocab-size 4000 --max-tokens 2048 --lr 3e-3 --warmup 300 --max-update 870 -- $D128"
  [rk2l_d128_v4k_b2k_lr2e-3_drop0]="--arch ode_transformer_rk2_learned_small --vocab-size 4000 --max-tokens 2048 --lr 2e-3 --warmup 300 --dropout 0 --max-update 870 -- $D128"
  [rk2l_d128_v4k_b4k_lr2e-3]="--arch ode_transformer_rk2_learned_small --vocab-size 4000 --max-tokens 4096 --lr 2e-3 --warmup 300 --max-update 450 -- $D128"
  [rk2l_d128_v8k_b2k_lr2e-3]="--arch ode_transformer_rk2_learned_small --vocab-size 8000 --max-tokens 2048 --lr 2e-3 --warmup 300 --max-update 740 -- $D128"
  [rk2l_d128_6-6_v4k_b2k_lr2e-3]="--arch ode_transformer_rk2_learned_small --vocab-size 4000 --max-tokens 2048 --lr 2e-3 --warmup 300 --max-update 480 -- $D128 --encoder-layers 6 --decoder-layers 6"
  [rk4_d128_v4k_b2k_lr2e-3]="--arch ode_transformer_rk4_small --vocab-size 4000 --max-tokens 2048 --lr 2e-3 --warmup 300 --max-update 640 -- $D128"
  [rk2l_d128_v4k_b2k_lr3e-3_drop0]="--arch ode_transformer_rk2_learned_small --vocab-size 4000 --max-tokens 2048 --lr 3e-3 --warmup 300 --dropout 0 --max-update 870 -- $D128"
  [rk4_d128_v4k_b2k_lr3e-3_drop0]="--arch ode_transformer_rk4_small --vocab-size 4000 --max-tokens 2048 --lr 3e-3 --warmup 300 --dropout 0 --max-update 640 -- $D128"
)
ORDER=(rk4_d256_v8k_b2k_lr1e-3 rk2l_d256_v4k_b2k_lr2e-3 rk2l_d128_v4k_b2k_lr2e-3 rk2l_d128_v4k_b2k_lr3e-3
       rk2l_d128_v4k_b2k_lr2e-3_drop0 rk2l_d128_v4k_b4k_lr2e-3 rk2l_d128_v8k_b2k_lr2e-3
       rk2l_d128_6-6_v4k_b2k_lr2e-3 rk4_d128_v4k_b2k_lr2e-3 rk2l_d128_v4k_b2k_lr3e-3_drop0
       rk4_d128_v4k_b2k_lr3e-3_drop0)

parse_options "$@" <<'EOF'
--work-dir=DIR        WORK_DIR  -         $REPO_ROOT/work-dirs/demo-sweep  # one sub-directory per setting
--settings=NAMES      SETTINGS  -         ${ORDER[*]}         # names from the list below, in quotes: "A B" (default: all)
--threads=N           THREADS   positive  ${OMP_THREADS:-1}   # intra-op threads per run (default: OMP_NUM_THREADS where set, else 1,
                                                              # so that CPU time is a fair measure of work on a shared machine;
                                                              # the demo itself uses every core)
--output=FILE         OUTPUT                                  # the Markdown table (default: WORK_DIR/sweep.md)
EOF
for name in $SETTINGS; do
  [[ -n "${SETTING[$name]:-}" ]] || usage_error "unknown setting '$name'; choose from: ${ORDER[*]}"
done
use_project_python
OUTPUT="${OUTPUT:-$WORK_DIR/sweep.md}"
lock_dir "$WORK_DIR"

for name in $SETTINGS; do
  run_dir="$WORK_DIR/$name"
  [[ -s "$run_dir/time.txt" ]] && { log "skip setting $name: $run_dir/time.txt exists"; continue; }
  log "setting $name: ${SETTING[$name]}"
  mkdir -p "$run_dir"
  echo "${SETTING[$name]}" > "$run_dir/options.txt"
  # shellcheck disable=SC2086  # the options are words
  OMP_NUM_THREADS="$THREADS" MKL_NUM_THREADS="$THREADS" /usr/bin/time -f "%e %U %S" -o "$run_dir/time.tmp" \
    "$HERE/run_bible_demo.sh" --work-dir "$run_dir" --workers "$THREADS" --gpus 0 ${SETTING[$name]} \
    > "$run_dir/demo.out" 2> "$run_dir/demo.err" || die "setting $name failed; see $run_dir/demo.err"
  publish "$run_dir/time.tmp" "$run_dir/time.txt"
done

python "$HERE/demo_sweep_table.py" --work-dir "$WORK_DIR" --threads "$THREADS" $SETTINGS \
  > "$OUTPUT.tmp" || { rm -f "$OUTPUT.tmp"; die "could not summarise the sweep"; }
publish "$OUTPUT.tmp" "$OUTPUT"
cat "$OUTPUT"
