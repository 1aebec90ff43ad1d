#!/usr/bin/env bash
# Teacher → ODE student on the bundled English→Spanish Bible corpus (ODE-ViT's plug & play
# distillation for translation):
#   1. prepare the corpus (examples/translation/prepare_bible.sh);
#   2. train a pre-norm fairseq `transformer` teacher for a fixed time, average its last checkpoints
#      and score it (BLEU);
#   3. distil a stable_ode_transformer student with one shared layer per stack (Euler, STEPS steps
#      over [0, LAYERS]) whose trajectory follows the teacher's layer outputs
#      (--criterion ode_trajectory_distillation, interface copied from the teacher), and score it;
#   4. with --baseline, train the same student architecture from scratch (label-smoothed
#      cross-entropy only, same updates, learning rate and seed) and score it;
#   5. print parameter counts and scores; with --baseline, the distilled-minus-scratch BLEU per
#      seed with its paired-bootstrap p-value (examples/distillation/baseline_table.py).
# Every stage is skipped when its output exists in --work-dir.
#
# Usage: run.sh [options]
#   --work-dir DIR          (default: work-dirs/distillation-bible)
#   --teacher-minutes M     teacher training time (default: 12)
#   --student-minutes M     student training time (default: 12)
#   --max-update N          update budget of each model instead of / besides time (0 = none; default 0)
#   --lr LR --warmup N      peak learning rate and its inverse-sqrt warmup, both models (default: 1e-3, 100)
#   --embed-dim D --ffn-dim F --heads H --layers L   teacher sizes; the student has the same width
#                           and integrates [0, L] with one shared layer (default: 256, 1024, 4, 3)
#   --arch NAME             the student's architecture (default: stable_ode_transformer_small)
#   --gpus N                0 = train on the CPU, N > 1 = data-parallel on N GPUs
#                           (default: 1 if CUDA is visible, else 0)
#   --seeds "S1 S2 ..."     one student (and scratch baseline) per seed; the teacher has seed 1 (default: 1)
#   --baseline              also train each seed's student from scratch and compare (see step 4)
#   --steps N               Euler steps of each student stack (default: 6)
#   --attention-kernel K    dot or l2 (default: dot)
#   --control-times MODE    uniform or distance (default: distance)
#   --ce-start-update N --ce-warmup-updates N --freeze-interface-updates N
#                           the curriculum (default: 100, 200, 200)
#   --max-len-a A --max-len-b B   translations stop at A·source length + B tokens (default: 1.5, 10)
#   --train-pairs N --valid-pairs N --test-pairs N --vocab-size N --workers N   for prepare_bible.sh
#                           (default here: all, 500, 500, 4000, nproc)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
TRANSLATION="$REPO_ROOT/examples/translation"

WORK_DIR="$REPO_ROOT/work-dirs/distillation-bible"
TEACHER_MINUTES=12
STUDENT_MINUTES=12
MAX_UPDATE=0
LR=1e-3
WARMUP=100
EMBED_DIM=256
FFN_DIM=1024
HEADS=4
LAYERS=3
STUDENT_ARCH=stable_ode_transformer_small
STEPS=6
KERNEL=dot
CONTROL_TIMES=distance
CE_START=100
CE_WARMUP=200
FREEZE=200
MAX_LEN_A=1.5
MAX_LEN_B=10
PREPARE_ARGS=(--valid-pairs 500 --test-pairs 500 --vocab-size 4000)
SEEDS=1
BASELINE=0
GPUS=""

while [[ $# -gt 0 ]]; do
  case "$1" in
    --work-dir) require_option_value "$@"; WORK_DIR="$2"; shift 2 ;;
    --teacher-minutes) require_option_value "$@"; TEACHER_MINUTES="$2"; shift 2 ;;
    --student-minutes) require_option_value "$@"; STUDENT_MINUTES="$2"; shift 2 ;;
    --max-update) require_option_value "$@"; MAX_UPDATE="$2"; shift 2 ;;
    --lr) require_option_value "$@"; LR="$2"; shift 2 ;;
    --warmup) require_option_value "$@"; WARMUP="$2"; shift 2 ;;
    --embed-dim) require_option_value "$@"; EMBED_DIM="$2"; shift 2 ;;
    --ffn-dim) require_option_value "$@"; FFN_DIM="$2"; shift 2 ;;
    --heads) require_option_value "$@"; HEADS="$2"; shift 2 ;;
    --layers) require_option_value "$@"; LAYERS="$2"; shift 2 ;;
    --arch) require_option_value "$@"; STUDENT_ARCH="$2"; shift 2 ;;
    --student-arch) usage_error "--student-arch is now --arch" ;;
    --gpus) require_option_value "$@"; GPUS="$2"; shift 2 ;;
    --seeds) require_option_value "$@"; SEEDS="$2"; shift 2 ;;
    --baseline) BASELINE=1; shift ;;
    --steps) require_option_value "$@"; STEPS="$2"; shift 2 ;;
    --attention-kernel) require_option_value "$@"; KERNEL="$2"; shift 2 ;;
    --control-times) require_option_value "$@"; CONTROL_TIMES="$2"; shift 2 ;;
    --ce-start-update) require_option_value "$@"; CE_START="$2"; shift 2 ;;
    --ce-warmup-updates) require_option_value "$@"; CE_WARMUP="$2"; shift 2 ;;
    --freeze-interface-updates) require_option_value "$@"; FREEZE="$2"; shift 2 ;;
    --max-len-a) require_option_value "$@"; MAX_LEN_A="$2"; shift 2 ;;
    --max-len-b) require_option_value "$@"; MAX_LEN_B="$2"; shift 2 ;;
    --train-pairs|--valid-pairs|--test-pairs|--vocab-size|--workers)
      require_option_value "$@"; PREPARE_ARGS+=("$1" "$2"); shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) unknown_option "$1" ;;
  esac
done
for n in "$WARMUP" "$EMBED_DIM" "$FFN_DIM" "$HEADS" "$LAYERS" "$STEPS" "$CE_START" "$CE_WARMUP" "$FREEZE" "$MAX_UPDATE"; do
  [[ "$n" =~ ^[0-9]+$ ]] || usage_error "numeric option expected, got '$n'"
done
for seed in $SEEDS; do
  [[ "$seed" =~ ^[1-9][0-9]*$ ]] || usage_error "--seeds takes positive whole numbers, got '$seed'"
done
[[ "$KERNEL" == dot || "$KERNEL" == l2 ]] || usage_error "--attention-kernel must be dot or l2, got $KERNEL"
[[ "$CONTROL_TIMES" == uniform || "$CONTROL_TIMES" == distance ]] \
  || usage_error "--control-times must be uniform or distance, got $CONTROL_TIMES"
[[ "$STEPS" -ge "$LAYERS" ]] \
  || usage_error "--steps $STEPS < --layers $LAYERS: every teacher layer needs its own student step"
[[ -z "$GPUS" ]] || require_gpus "$GPUS"
use_project_python
GPUS="${GPUS:-$(default_gpus)}"

DATA_BIN="$WORK_DIR/data-bin"
TEACHER_DIR="$WORK_DIR/checkpoints/teacher"
STUDENT_NAME="$STUDENT_ARCH-$KERNEL-euler$STEPS"
student_dir() { echo "$WORK_DIR/checkpoints/student-$STUDENT_NAME-$CONTROL_TIMES-seed$1"; }
scratch_dir() { echo "$WORK_DIR/checkpoints/scratch-$STUDENT_NAME-seed$1"; }
SIZES=(--encoder-embed-dim "$EMBED_DIM" --decoder-embed-dim "$EMBED_DIM"
       --encoder-ffn-embed-dim "$FFN_DIM" --decoder-ffn-embed-dim "$FFN_DIM"
       --encoder-attention-heads "$HEADS" --decoder-attention-heads "$HEADS"
       --encoder-layers "$LAYERS" --decoder-layers "$LAYERS")

evaluate() {  # evaluate SAVE_DIR — average the newest (up to 5) update checkpoints, translate, score
  local saved average
  saved="$(find "$1" -maxdepth 1 -name 'checkpoint_*_*.pt' | wc -l)"
  if [[ "$saved" -ge 2 ]]; then
    average=(--average-last "$((saved < 5 ? saved : 5))" --checkpoint-kind update)
  else
    average=(--average-last 1)
  fi
  "$TRANSLATION/evaluate.sh" --data-bin "$DATA_BIN" --checkpoint-dir "$1" --gpus "$(( GPUS > 0 ))" \
    --ref "$WORK_DIR/raw/test.es" --lang es "${average[@]}" \
    -- --max-len-a "$MAX_LEN_A" --max-len-b "$MAX_LEN_B" > /dev/null
}

# 1. Data.
"$TRANSLATION/prepare_bible.sh" --work-dir "$WORK_DIR" "${PREPARE_ARGS[@]}"

# 2. Teacher: fairseq's own pre-norm Transformer (the ODE state of layer l is its output).
"$TRANSLATION/train_bible.sh" --data-bin "$DATA_BIN" --save-dir "$TEACHER_DIR" --arch transformer \
  --gpus "$GPUS" --minutes "$TEACHER_MINUTES" --max-update "$MAX_UPDATE" --lr "$LR" --warmup "$WARMUP" \
  -- --encoder-normalize-before --decoder-normalize-before "${SIZES[@]}"
evaluate "$TEACHER_DIR"
TEACHER="$TEACHER_DIR/eval-test/averaged.pt"
require_file "$TEACHER" "the teacher's evaluation did not write its averaged checkpoint"

# 3. Students: one shared stable layer per stack following the teacher's trajectory; 4. with
# --baseline, the same architecture trained from scratch on label-smoothed cross-entropy alone.
STUDENT=(--arch "$STUDENT_ARCH" --gpus "$GPUS" --minutes "$STUDENT_MINUTES" --max-update "$MAX_UPDATE"
         --lr "$LR"
         --warmup "$WARMUP" -- "${SIZES[@]}" --encoder-ode-steps "$STEPS" --decoder-ode-steps "$STEPS"
         --attention-kernel "$KERNEL")
for seed in $SEEDS; do
  "$TRANSLATION/train_bible.sh" --data-bin "$DATA_BIN" --save-dir "$(student_dir "$seed")" \
    --seed "$seed" "${STUDENT[@]}" --init-from-teacher "$TEACHER" \
    --criterion ode_trajectory_distillation --teacher-path "$TEACHER" \
    --control-times "$CONTROL_TIMES" --ce-start-update "$CE_START" \
    --ce-warmup-updates "$CE_WARMUP" --freeze-interface-updates "$FREEZE"
  evaluate "$(student_dir "$seed")"
  if [[ "$BASELINE" -eq 1 ]]; then
    "$TRANSLATION/train_bible.sh" --data-bin "$DATA_BIN" --save-dir "$(scratch_dir "$seed")" \
      --seed "$seed" "${STUDENT[@]}"
    evaluate "$(scratch_dir "$seed")"
  fi
done

# 5. Report.
echo
echo "English→Spanish Bible test set ($(wc -l < "$WORK_DIR/raw/test.es") verses), beam 4, lenpen 0.6:"
REPORTED=("$TEACHER_DIR")
for seed in $SEEDS; do
  REPORTED+=("$(student_dir "$seed")")
  if [[ "$BASELINE" -eq 1 ]]; then REPORTED+=("$(scratch_dir "$seed")"); fi
done
for dir in "${REPORTED[@]}"; do
  echo "== $(basename "$dir")"
  python "$REPO_ROOT/examples/distillation/parameter_count.py" "$dir/eval-test/averaged.pt" "$DATA_BIN"
  cat "$dir/eval-test/scores.txt"
done
if [[ "$BASELINE" -eq 1 ]]; then
  PAIRS=()
  for seed in $SEEDS; do
    PAIRS+=(--pair "$seed" "$(student_dir "$seed")/eval-test/generate-test.txt" \
            "$(scratch_dir "$seed")/eval-test/generate-test.txt")
  done
  echo
  python "$REPO_ROOT/examples/distillation/baseline_table.py" --ref "$WORK_DIR/raw/test.es" --lang es \
    "${PAIRS[@]}"
fi
