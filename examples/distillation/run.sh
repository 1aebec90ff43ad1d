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
# With --teacher-iterations R (IIET's efficiency step), the teacher is an ode_transformer whose
# stacks are IIET with R iterations (iieR), scored also at --student-iterations R' < R without
# retraining (--model-overrides); the student is the same architecture with R' iterations, started
# from the teacher's weights (--finetune-from-model), its blocks following the teacher's block by
# block (--control-times uniform, no JaSMin); the stable-student options (--arch, --steps,
# --attention-kernel, --freeze-interface-updates) do not apply.
# Every stage is skipped when its output exists in --work-dir.
#
# Usage: run.sh [options]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
TRANSLATION="$REPO_ROOT/examples/translation"
parse_options "$@" <<'EOF'
--work-dir=DIR        WORK_DIR         -         $REPO_ROOT/work-dirs/distillation-bible
--teacher-minutes=M   TEACHER_MINUTES  number    12      # teacher training time
--student-minutes=M   STUDENT_MINUTES  number    12      # student training time
--max-update=N        MAX_UPDATE       whole     0       # update budget of each model instead of / besides time (0 = none)
--lr=LR               LR               number    1e-3    # peak learning rate of both models
--warmup=N            WARMUP           whole     100     # its inverse-sqrt warmup
--embed-dim=D         EMBED_DIM        positive  256     # teacher width (the student has the teacher's sizes)
--ffn-dim=F           FFN_DIM          positive  1024    # teacher FFN width
--heads=H             HEADS            positive  4       # teacher attention heads
--layers=L            LAYERS           positive  3       # teacher layers; each student stack integrates [0, L] with one shared layer
--arch=NAME           STUDENT_ARCH     -         stable_ode_transformer_small  # the student's architecture
--student-arch=NAME   -                is-now:--arch
--gpus=N              GPUS             gpus              # 0 = train on the CPU, N > 1 = data-parallel on N GPUs
                                                         # (default: 1 if CUDA is visible, else 0)
--seeds=LIST          SEEDS            positives  1      # "S1 S2 ...": one student (and scratch baseline) per seed; the teacher has seed 1
--baseline            BASELINE                           # also train each seed's student from scratch and compare (see step 4)
--steps=N             STEPS            positive  6       # Euler steps of each student stack
--attention-kernel=K  KERNEL           dot|l2    dot     # dot or l2
--control-times=MODE  CONTROL_TIMES    uniform|distance  distance  # uniform or distance
--teacher-iterations=R  TEACHER_ITERATIONS  whole  0   # 0: a pre-norm transformer teacher; 1-4: an IIET teacher with R iterations (see above)
--student-iterations=R  STUDENT_ITERATIONS  whole  1   # with --teacher-iterations R: the student's iterations, fewer than R (0 = the residual layer)
--ce-start-update=N   CE_START         whole     100     # the curriculum: cross-entropy joins at this update
--ce-warmup-updates=N CE_WARMUP        whole     200     # then ramps up to its full weight over N updates
--freeze-interface-updates=N  FREEZE   whole     200     # the interface copied from the teacher stays frozen this long
--max-len-a=A         MAX_LEN_A        number    1.5     # translations stop at A·source length + B tokens
--max-len-b=B         MAX_LEN_B        whole     10
--train-pairs|--valid-pairs|--test-pairs|--vocab-size|--workers=N  PREPARE_ARGS[]  forward  --valid-pairs 500 --test-pairs 500 --vocab-size 4000
                                                         # for prepare_bible.sh
EOF
iiet_method() {  # iiet_method R — the --*-ode-method of IIET with R iterations (0: euler)
  if [[ "$1" -eq 0 ]]; then echo euler; else echo "iie$1"; fi
}
if [[ "$TEACHER_ITERATIONS" -gt 0 ]]; then
  [[ "$TEACHER_ITERATIONS" -le 4 ]] \
    || usage_error "--teacher-iterations $TEACHER_ITERATIONS: IIET is defined here for 1 to 4 iterations (iie1 … iie4)"
  [[ "$STUDENT_ITERATIONS" -lt "$TEACHER_ITERATIONS" ]] \
    || usage_error "--student-iterations $STUDENT_ITERATIONS is not fewer than --teacher-iterations $TEACHER_ITERATIONS"
  [[ "$CONTROL_TIMES" == uniform ]] \
    || usage_error "--teacher-iterations: an IIET student follows its teacher block by block: pass --control-times uniform"
else
  [[ "$STEPS" -ge "$LAYERS" ]] \
    || usage_error "--steps $STEPS < --layers $LAYERS: every teacher layer needs its own student step"
fi
use_project_python
GPUS="${GPUS:-$(default_gpus)}"
lock_dir "$WORK_DIR"

DATA_BIN="$WORK_DIR/data-bin"
SIZES=(--encoder-embed-dim "$EMBED_DIM" --decoder-embed-dim "$EMBED_DIM"
       --encoder-ffn-embed-dim "$FFN_DIM" --decoder-ffn-embed-dim "$FFN_DIM"
       --encoder-attention-heads "$HEADS" --decoder-attention-heads "$HEADS"
       --encoder-layers "$LAYERS" --decoder-layers "$LAYERS")
if [[ "$TEACHER_ITERATIONS" -gt 0 ]]; then
  IIET_ARCH=ode_transformer_rk4_encdec_small
  TEACHER_METHOD="$(iiet_method "$TEACHER_ITERATIONS")" STUDENT_METHOD="$(iiet_method "$STUDENT_ITERATIONS")"
  TEACHER_DIR="$WORK_DIR/checkpoints/teacher-$TEACHER_METHOD"
  TEACHER_MODEL=(--arch "$IIET_ARCH" -- --encoder-ode-method "$TEACHER_METHOD" --decoder-ode-method "$TEACHER_METHOD")
  STUDENT_NAME="$STUDENT_METHOD-from-$TEACHER_METHOD"
  STUDENT_MODEL=(--arch "$IIET_ARCH" -- "${SIZES[@]}" --encoder-ode-method "$STUDENT_METHOD"
                 --decoder-ode-method "$STUDENT_METHOD")
  # Same architecture and parameters: the student starts as the teacher at fewer iterations.
  STUDENT_START=(--jasmin-weight 0 --finetune-from-model)
else
  TEACHER_DIR="$WORK_DIR/checkpoints/teacher"
  TEACHER_MODEL=(--arch transformer -- --encoder-normalize-before --decoder-normalize-before)
  STUDENT_NAME="$STUDENT_ARCH-$KERNEL-euler$STEPS"
  STUDENT_MODEL=(--arch "$STUDENT_ARCH" -- "${SIZES[@]}" --encoder-ode-steps "$STEPS" --decoder-ode-steps "$STEPS"
                 --attention-kernel "$KERNEL")
  STUDENT_START=(--freeze-interface-updates "$FREEZE" --init-from-teacher)
fi
student_dir() { echo "$WORK_DIR/checkpoints/student-$STUDENT_NAME-$CONTROL_TIMES-seed$1"; }
scratch_dir() { echo "$WORK_DIR/checkpoints/scratch-$STUDENT_NAME-seed$1"; }

evaluate() {  # evaluate SAVE_DIR [evaluate.sh options] [-- generate options] — average the newest
  # (up to 5) update checkpoints, translate, score
  local save_dir="$1"
  shift
  [[ " $* " == *" -- "* ]] || set -- "$@" --
  bible_test_scores "$WORK_DIR" "$save_dir" "$GPUS" "$@" --max-len-a "$MAX_LEN_A" --max-len-b "$MAX_LEN_B"
}

# 1. Data.
"$TRANSLATION/prepare_bible.sh" --work-dir "$WORK_DIR" "${PREPARE_ARGS[@]}"

# 2. Teacher: fairseq's own pre-norm Transformer (the ODE state of layer l is its output), or IIET
# with R iterations (the state of block l is its output); an IIET teacher is also scored at R'.
"$TRANSLATION/train_bible.sh" --data-bin "$DATA_BIN" --save-dir "$TEACHER_DIR" --gpus "$GPUS" \
  --minutes "$TEACHER_MINUTES" --max-update "$MAX_UPDATE" --lr "$LR" --warmup "$WARMUP" \
  "${TEACHER_MODEL[@]}" "${SIZES[@]}"
evaluate "$TEACHER_DIR"
TEACHER="$TEACHER_DIR/eval-test/averaged.pt"
require_file "$TEACHER" "the teacher's evaluation did not write its averaged checkpoint"
if [[ "$TEACHER_ITERATIONS" -gt 0 ]]; then
  evaluate "$TEACHER_DIR" --out-dir "$TEACHER_DIR/eval-test-$STUDENT_METHOD" \
    -- --model-overrides "{'encoder_ode_method': '$STUDENT_METHOD', 'decoder_ode_method': '$STUDENT_METHOD'}"
fi

# 3. Students: one shared stable layer per stack, or IIET with R' iterations, following the
# teacher's trajectory; 4. with --baseline, the same architecture trained from scratch on
# label-smoothed cross-entropy alone.
STUDENT=(--gpus "$GPUS" --minutes "$STUDENT_MINUTES" --max-update "$MAX_UPDATE" --lr "$LR" --warmup "$WARMUP"
         "${STUDENT_MODEL[@]}")
for seed in $SEEDS; do
  "$TRANSLATION/train_bible.sh" --data-bin "$DATA_BIN" --save-dir "$(student_dir "$seed")" \
    --seed "$seed" "${STUDENT[@]}" "${STUDENT_START[@]}" "$TEACHER" \
    --criterion ode_trajectory_distillation --teacher-path "$TEACHER" \
    --control-times "$CONTROL_TIMES" --ce-start-update "$CE_START" \
    --ce-warmup-updates "$CE_WARMUP"
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
# One process counts every model's parameters (fairseq's import is most of the time).
COUNT_LINES="$(python "$REPO_ROOT/examples/distillation/parameter_count.py" "$DATA_BIN" \
  "${REPORTED[@]/%//eval-test/averaged.pt}")" || die "counting the models' parameters failed (message above)"
mapfile -t COUNTS <<< "$COUNT_LINES"
for i in "${!REPORTED[@]}"; do
  dir="${REPORTED[$i]}"
  echo "== $(basename "$dir")"
  echo "${COUNTS[$i]}"
  cat "$dir/eval-test/scores.txt"
  if [[ "$dir" == "$TEACHER_DIR" && "$TEACHER_ITERATIONS" -gt 0 ]]; then
    echo "== $(basename "$dir") decoded with $STUDENT_METHOD (--model-overrides, not distilled)"
    cat "$dir/eval-test-$STUDENT_METHOD/scores.txt"
  fi
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
