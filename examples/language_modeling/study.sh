#!/usr/bin/env bash
# The converged language-model study on the bundled Bible (prepare.sh's English column): every
# configuration trained to convergence with train.sh's bible recipe (2 layers, d = 128, FFN 512,
# 128-token blocks, 4,096 tokens per update, dropout 0.1, inverse square-root decay; one validation
# per epoch, stopped after --patience validations without a better loss or at --max-epoch epochs)
# with an adaptive input and softmax (--adaptive: the full softmax over the 9,040 words is three
# quarters of a residual model's time; 94 % of the tokens are among the 2,000 most frequent words),
# the best checkpoint scored on the test split (evaluate.sh: context window 64, every token's
# log-probability kept), over several seeds; then a table of test perplexity (mean ± sd), the
# per-seed difference against the residual model with a paired bootstrap over test verses, epochs
# and why each run stopped, tokens/s and minutes per run, and a figure of the validation curves.
# Configurations, at equal parameters unless said, in the study's priority order: residual (Euler),
# RK2 with learned coefficients, residual with twice the layers (the compute of RK2-learned; more
# parameters), PCformer with a Heun predictor (as its paper runs language models), residual with
# DLCL (about 1x compute), RK4, PCformer with an RK4 predictor, IIET (3 iterations), the
# non-autonomous model.
# The peak lr is tuned on seed 1 for --tuned configurations over --tune-lrs: each lr trains
# --tune-epochs epochs, the one with the lowest validation loss by then is chosen, and only its run
# trains on to convergence (as seed 1); the others use RK2-learned's choice (else the first tuned
# configuration's).
# Runs go in parallel (--jobs), one thread each unless OMP_NUM_THREADS says otherwise. A rerun
# resumes: finished stages are reused, an unfinished training resumes from its last checkpoint, and
# with --record-dir every finished run's record (settings, data digest, training log, scores, verse
# log-likelihoods; no checkpoints) is kept there and reused, also in a fresh checkout;
# --keep-unfinished --unfinished-dir DIR keeps the last checkpoints of the runs still training in DIR (a directory
# you name, never the records: checkpoints are not committed), from which a study given DIR resumes them.
#
# Usage: study.sh [options]
# Layout: every run is WORK_DIR/grid/CONFIG/lrLR/seedS; WORK_DIR/chosen/CONFIG links to the lr the
# table reports; the table is WORK_DIR/results.md, the figure WORK_DIR/curves.png.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
HERE="$REPO_ROOT/examples/language_modeling"

use_project_python
# The configurations, their models and pairings, in the study's priority order: ode_seq/studies.py
# (CONFIG_ARCH, CONFIG_LAYERS: the decoder's layers, CONFIG_OPTIONS; CONFIG_TEACHER: train with an ODE
# block, serve at residual cost: the teacher's best checkpoint (same seed, the lr the run names) as the
# residual model of its layers (ode-seq as-residual), fine-tuned at --residual-lr for --residual-share of
# the teacher's training FLOPs; a teacher whose run here has no checkpoint (read from its record) is
# retrained in WORK_DIR/teachers and scored, and the record of the run made from it keeps it, in teacher/,
# for the pairing; -P: this checkout's table, whatever the working directory).
STUDY="$(python -P -m ode_seq.studies shell lm)" || die "could not read the table of studies (message above)"
eval "$STUDY"

parse_options "$@" <<'EOF'
--work-dir=DIR        WORK_DIR       -          $REPO_ROOT/work-dirs/lm-study
--configs=LIST        CONFIGS        -          $STUDY_DEFAULT_CONFIGS  # in quotes, of the study's configurations (ode_seq/studies.py;
                                                # python -m ode_seq.studies list lm), in its priority order
--tuned=LIST          TUNED          -          $STUDY_DEFAULT_TUNED  # configurations whose lr is tuned on seed 1
--tune-lrs=LIST       TUNE_LRS       numbers    $STUDY_TUNE_LRS  # peak learning rates tried (the bible recipe's bracket: docs/results.md)
--tune-epochs=N       TUNE_EPOCHS    positive   10        # epochs each tried lr trains before the choice (at least
                                                          # --max-epoch: every tuning run trains to convergence)
--seeds=LIST          SEEDS          positives  1 2 3     # in quotes: "1 2 3"
--max-epoch=N         MAX_EPOCH      positive   40        # the epoch cap
--patience=N          PATIENCE       positive   5         # validations without a better loss before a run stops
--adaptive=CUTOFFS    ADAPTIVE       -          2000,5000  # train.sh --adaptive: the words' cutoffs (none: a full softmax)
--record-dir=DIR      RECORD_DIR                          # keep each finished run's record here and reuse it (see above)
--residual-lr=LR      RESIDUAL_LR    number     1e-3      # the peak lr of a teacher's residual model's fine-tune
--residual-share=F    RESIDUAL_SHARE number     0.1       # its training FLOPs, as a share of the teacher's run's
--jobs=N              JOBS           positive   $(nproc)  # runs at a time, each with OMP_NUM_THREADS intra-op threads, 1 where that is
                                                          # unset (default: nproc)
--gpus=N              GPUS           gpus                 # 0 = train on the CPU, N > 1 = data-parallel on N GPUs, for every run
                                                          # (default: 1 if CUDA is visible, else 0)
--train-lines|--valid-lines|--test-lines|--workers=N  PREPARE_ARGS[]  forward  # for prepare.sh
--=OPTIONS            TRAIN_EXTRA[]                       # extra fairseq-train options for every run (after the recipe's)
--run=RUN             RUN                                 # one run of the study, "CONFIG SEED LR" ("CONFIG SEED LR tune": its tuning
                                                          # epochs; the study runs them)
--keep-unfinished     KEEP_UNFINISHED                     # instead of the study: keep each unfinished run's last (and best) checkpoint and
                                                          # log in --unfinished-dir, to move a stopped study to another work dir or machine
--unfinished-dir=DIR  UNFINISHED_DIR                      # where --keep-unfinished keeps runs still training, and from where the study
                                                          # resumes them (outside --record-dir: checkpoints are never committed)
--speed-check=N       SPEED_CHECK   whole    0            # instead of the study: train each configuration N updates, one at a time (seed 1,
                                                          # checkpoints deleted), then print their tokens/s, minutes per epoch and the
                                                          # run-hours of the study (WORK_DIR/speed.md)
EOF
for config in $CONFIGS $TUNED; do
  [[ -n "${CONFIG_ARCH[$config]:-}" ]] || usage_error "unknown configuration '$config'; choose from: $STUDY_CONFIGS"
done
[[ "$ADAPTIVE" =~ ^(none|[1-9][0-9]*(,[1-9][0-9]*)*)$ ]] \
  || usage_error "--adaptive takes word counts separated by commas, such as 2000,5000, or none, got '$ADAPTIVE'"
for config in $TUNED; do
  [[ " $CONFIGS " == *" $config "* ]] || usage_error "--tuned names $config, which is not in --configs ($CONFIGS)"
done
[[ -z "$RUN" ]] || check_run_option "$RUN" CONFIG=keys:CONFIG_ARCH SEED=positive LR=number '[tune]'
(( (${#RUN} > 0) + KEEP_UNFINISHED + (SPEED_CHECK > 0) <= 1 )) \
  || usage_error "--run, --keep-unfinished and --speed-check each do something other than the study: give one"
[[ "$KEEP_UNFINISHED" == 0 || -n "$UNFINISHED_DIR" ]] \
  || usage_error "--keep-unfinished keeps the runs in --unfinished-dir: name a directory outside --record-dir"
if [[ -n "$UNFINISHED_DIR" && -n "$RECORD_DIR" ]]; then
  case "$(realpath -m "$UNFINISHED_DIR")/" in
    "$(realpath -m "$RECORD_DIR")"/*) usage_error "--unfinished-dir $UNFINISHED_DIR is inside --record-dir $RECORD_DIR: \
checkpoints are never kept with the records (which are committed); name a directory outside it" ;;
  esac
fi
[[ -z "$RECORD_DIR" ]] || check_record_dir "$RECORD_DIR"
GPUS="${GPUS:-$(default_gpus)}"
DATA_BIN="$WORK_DIR/data-bin"
TUNE_EPOCHS=$(( TUNE_EPOCHS < MAX_EPOCH ? TUNE_EPOCHS : MAX_EPOCH ))
EARLY_STOP="early stop since valid performance hasn't improved"  # fairseq-train's words

recipe() {  # recipe LR SEED [EPOCHS] — the settings line a run's record holds (EPOCHS: the cap, default --max-epoch)
  echo "max_epoch=${3:-$MAX_EPOCH} patience=$PATIENCE adaptive=$ADAPTIVE lr=$1 seed=$2 extra=${TRAIN_EXTRA[*]}"
}

data_id() {  # the digest of the data a run depends on: dictionary, training text, test text
  content_id "$DATA_BIN/dict.txt" "$DATA_BIN"/train.{bin,idx} "$DATA_BIN"/test.{bin,idx}
}

run_recipe() {  # run_recipe CONFIG LR SEED — recipe, with the fine-tune's settings for a teacher's residual model
  if [[ -n "${CONFIG_TEACHER[$1]:-}" ]]; then
    echo "$(recipe "$2" "$3") teacher=${CONFIG_TEACHER[$1]} residual_lr=$RESIDUAL_LR residual_share=$RESIDUAL_SHARE"
  else
    recipe "$2" "$3"
  fi
}

FINETUNE=()  # fairseq-train options of a fine-tune (run_one sets them for a teacher's residual model)
train_config() {  # train_config CONFIG SAVE_DIR [train.sh options] — train.sh with the configuration's model
  local config="$1" save_dir="$2" output_layer=() layers=()
  shift 2
  [[ "$ADAPTIVE" == none ]] || output_layer=(--adaptive "$ADAPTIVE")
  [[ "${CONFIG_LAYERS[$config]}" == "$STUDY_LAYERS" ]] || layers=(--decoder-layers "${CONFIG_LAYERS[$config]}")
  # shellcheck disable=SC2086  # the configuration's model options are words
  "$HERE/train.sh" --work-dir "$WORK_DIR" --arch "${CONFIG_ARCH[$config]}" --save-dir "$save_dir" --gpus "$GPUS" \
    "${output_layer[@]}" "$@" \
    -- "${layers[@]}" ${CONFIG_OPTIONS[$config]:-} "${TRAIN_EXTRA[@]}" "${FINETUNE[@]}"
}

flops_file() {  # flops_file CONFIG — its counted FLOPs per token
  echo "$WORK_DIR/flops/$1.txt"
}

count_config_flops() {  # count_config_flops CONFIG LR — `ode-seq flops` of the configuration's first batch, once
  run_stage "$(flops_file "$1")" "the FLOPs per token of $1" || return 0
  train_config "$1" "$WORK_DIR/flops/$1" --lr "$2" --seed "${SEEDS%% *}" --count-flops "$(flops_file "$1")"
}

teacher_dir() {  # teacher_dir CONFIG SEED LR — the finished run of the configuration's teacher (seed SEED, lr LR):
  local teacher="${CONFIG_TEACHER[$1]}" dir  # the study's own, else a retraining of it (a record keeps no checkpoint)
  dir="$WORK_DIR/grid/$teacher/lr$3/seed$2"
  if [[ ! -e "$dir/train.done" || ! -e "$dir/checkpoint_best.pt" ]]; then
    dir="$WORK_DIR/teachers/$teacher/lr$3/seed$2"
    mkdir -p "$dir"
    train_config "$teacher" "$dir" --lr "$3" --seed "$2" --max-epoch "$MAX_EPOCH" --patience "$PATIENCE" \
      > "$dir/train.stdout" 2>&1 || die "training the teacher $teacher seed $2 failed; see $dir/train.log"
  fi
  echo "$dir"
}

residual_epochs() {  # residual_epochs CONFIG TEACHER_DIR — the fine-tune's epochs: --residual-share of the training
  python - "$2/train.log" "$(flops_file "${CONFIG_TEACHER[$1]}")" "$(flops_file "$1")" "$RESIDUAL_SHARE" <<'PY'
import sys
from pathlib import Path
from ode_seq.analysis.flops import FlopCount, training_tokens
log, teacher, student, share = sys.argv[1:]  # FLOPs of the teacher's run, in epochs of the student (at least one)
tokens = training_tokens(Path(log).read_text(encoding="utf-8"))
per_token = [FlopCount.parse(Path(p).read_text(encoding="utf-8"), p).training_per_token for p in (teacher, student)]
print(max(1, int(float(share) * tokens[-1] * per_token[0] / (per_token[1] * tokens[-1] / len(tokens)))))
PY
}

from_teacher() {  # from_teacher CONFIG LR TEACHER_RUN SAVE_DIR — the residual model of TEACHER_RUN's best checkpoint
  local epochs  # (SAVE_DIR/residual-init.pt); prints the fine-tune's train.sh options
  count_config_flops "${CONFIG_TEACHER[$1]}" "$2" >&2
  count_config_flops "$1" "$RESIDUAL_LR" >&2
  epochs="$(residual_epochs "$1" "$3")" || die "could not size the fine-tune of $4"
  if [[ ! -e "$4/residual-init.pt" ]]; then
    ode-seq as-residual --path "$3/checkpoint_best.pt" --output "$4/residual-init.pt" >&2 \
      || die "could not make the residual model of $3/checkpoint_best.pt"
  fi
  echo "--lr $RESIDUAL_LR --max-epoch $epochs"
}

score_run() {  # score_run RUN_DIR NAME — the test perplexity of RUN_DIR's best checkpoint and the log-likelihood
  "$HERE/evaluate.sh" --work-dir "$WORK_DIR" --checkpoint-dir "$1" --out-dir "$1/eval-test" \
    --gpus "$((GPUS > 0))" -- --output-word-probs > /dev/null  # of each test verse, in RUN_DIR/eval-test
  if run_stage "$1/eval-test/verse-scores.txt" "verse log-likelihoods of $2"; then
    python "$HERE/lm_text.py" verse-scores "$1/eval-test/eval-lm.log" --subset "$DATA_BIN/test" \
      > "$1/eval-test/verse-scores.txt.tmp" || die "no verse scores of $1 (message above)"
    publish "$1/eval-test/verse-scores.txt.tmp" "$1/eval-test/verse-scores.txt"
  fi
}

keep_tuning_log() {  # keep_tuning_log SAVE_DIR — the training log as it is, as SAVE_DIR/tuning.log
  cp "$1/train.log" "$1/tuning.log.tmp"
  publish "$1/tuning.log.tmp" "$1/tuning.log"
}

unfinished_record() {  # unfinished_record CONFIG SEED LR — where --keep-unfinished keeps that run's state
  echo "$UNFINISHED_DIR/$1/lr$3/seed$2"
}

keep_unfinished() {  # keep_unfinished CONFIG SEED LR — the run's last checkpoint (its best too, where that is
  local save_dir="$WORK_DIR/grid/$1/lr$3/seed$2" files=(recipe.txt data-id.txt train.log checkpoint_last.pt)
  if [[ -e "$save_dir/checkpoint_best.pt" ]] && ! cmp -s "$save_dir"/checkpoint_{best,last}.pt; then
    files+=(checkpoint_best.pt)  # another epoch) and training log, in its unfinished record
  fi
  recipe "$3" "$2" > "$save_dir/recipe.txt"
  data_id > "$save_dir/data-id.txt"
  record_run "$save_dir" "$(unfinished_record "$@")" "${files[@]}"
  log "kept $1 seed $2 (lr $3) at epoch $(sed -n "s/.*epoch 0*\([0-9]*\) | valid on.*/\1/p" "$save_dir/train.log" | tail -1): \
$(unfinished_record "$@")"
}

resume_unfinished() {  # resume_unfinished CONFIG SEED LR — a kept run's state into its save dir, where that has none
  local save_dir="$WORK_DIR/grid/$1/lr$3/seed$2" record
  record="$(unfinished_record "$@")"
  [[ -n "$UNFINISHED_DIR" && -d "$record" && ! -e "$save_dir/checkpoint_last.pt" ]] || return 0  # (digest only then)
  restore_run "$record" "$save_dir" recipe.txt "$(recipe "$3" "$2")" "$(data_id)" || return 0
  log "resumed $1 seed $2 (lr $3) from its kept state: $record"
}

tune_one() {  # tune_one CONFIG SEED LR — the run's first --tune-epochs epochs; their log is SAVE_DIR/tuning.log
  local config="$1" seed="$2" lr="$3" save_dir record="" full="" data
  save_dir="$WORK_DIR/grid/$config/lr$lr/seed$seed"
  if [[ -n "$RECORD_DIR" ]]; then
    record="$RECORD_DIR/tuning/$config/lr$lr/seed$seed" full="$RECORD_DIR/grid/$config/lr$lr/seed$seed"
    data="$(data_id)"
    if restore_run "$full" "$save_dir" recipe.txt "$(recipe "$lr" "$seed")" "$data"; then
      keep_tuning_log "$save_dir"  # a whole run holds its first epochs
      log "reused the record of $config seed $seed (lr $lr) for its tuning"
      return
    fi
    if restore_run "$record" "$save_dir" tuning-recipe.txt "$(recipe "$lr" "$seed" "$TUNE_EPOCHS")" "$data"; then
      log "reused the tuning record of $config seed $seed (lr $lr): $record"
      return
    fi
  fi
  if [[ ! -s "$save_dir/tuning.log" ]]; then
    resume_unfinished "$config" "$seed" "$lr"
    mkdir -p "$save_dir"
    if [[ ! -e "$save_dir/train.done" ]]; then  # (a whole run trained here holds its first epochs)
      train_config "$config" "$save_dir" --lr "$lr" --seed "$seed" --max-epoch "$TUNE_EPOCHS" --patience "$PATIENCE" \
        > "$save_dir/train.stdout" 2>&1 || die "training $config seed $seed failed; see $save_dir/train.log"
      rm "$save_dir/train.done"  # the study may train it on
    fi
    keep_tuning_log "$save_dir"
  fi
  if [[ -n "$record" ]]; then
    recipe "$lr" "$seed" "$TUNE_EPOCHS" > "$save_dir/tuning-recipe.txt"
    echo "$data" > "$save_dir/data-id.txt"
    record_run "$save_dir" "$record" tuning-recipe.txt data-id.txt tuning.log
  fi
  log "tuned $config seed $seed (lr $lr): $TUNE_EPOCHS epochs"
}

run_one() {  # run_one CONFIG SEED LR — train to convergence, score the best checkpoint, keep the record
  local config="$1" seed="$2" lr="$3" save_dir record=""
  save_dir="$WORK_DIR/grid/$config/lr$lr/seed$seed"
  [[ -z "$RECORD_DIR" ]] || record="$RECORD_DIR/grid/$config/lr$lr/seed$seed"
  if [[ -n "$record" ]] && restore_run "$record" "$save_dir" recipe.txt "$(run_recipe "$config" "$lr" "$seed")" \
    "$(data_id)"; then
    log "reused the record of $config seed $seed (lr $lr): $record"
    return
  fi
  resume_unfinished "$config" "$seed" "$lr"
  mkdir -p "$save_dir"
  local budget=(--lr "$lr" --max-epoch "$MAX_EPOCH") teacher_run="" file
  local files=(recipe.txt data-id.txt train.log eval-test/scores.txt eval-test/verse-scores.txt)
  if [[ -n "${CONFIG_TEACHER[$config]:-}" ]]; then
    local options
    teacher_run="$(teacher_dir "$config" "$seed" "$lr")" || exit 1
    options="$(from_teacher "$config" "$lr" "$teacher_run" "$save_dir")" || exit 1
    read -r -a budget <<< "$options"
    FINETUNE=(--finetune-from-model "$save_dir/residual-init.pt")
  fi
  # A run that patience stopped (in its tuning epochs) is over: resumed, fairseq-train would train
  # another epoch before it looks at the count again.
  if ! grep -qs "$EARLY_STOP" "$save_dir/train.log"; then
    train_config "$config" "$save_dir" "${budget[@]}" --seed "$seed" --patience "$PATIENCE" \
      > "$save_dir/train.stdout" 2>&1 || die "training $config seed $seed failed; see $save_dir/train.log"
  fi
  score_run "$save_dir" "$config seed $seed"
  if [[ "$teacher_run" == "$WORK_DIR/teachers/"* ]]; then  # retrained for this run, which is paired with it:
    score_run "$teacher_run" "the teacher of $config seed $seed"  # the run's record keeps it (teacher/)
    mkdir -p "$save_dir/teacher/eval-test"
    for file in train.log eval-test/scores.txt eval-test/verse-scores.txt; do
      cp "$teacher_run/$file" "$save_dir/teacher/$file"
      files+=("teacher/$file")
    done
  fi
  if [[ -n "$record" ]]; then
    run_recipe "$config" "$lr" "$seed" > "$save_dir/recipe.txt"
    data_id > "$save_dir/data-id.txt"
    record_run "$save_dir" "$record" "${files[@]}"
  fi
  [[ -z "$UNFINISHED_DIR" ]] || rm -rf "$(unfinished_record "$config" "$seed" "$lr")"
  log "finished $config seed $seed (lr $lr)"
}

if [[ -n "$RUN" ]]; then
  # One run: OMP_NUM_THREADS intra-op threads where it is set, else one (--jobs run at a time).
  export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}" MKL_NUM_THREADS="${MKL_NUM_THREADS:-${OMP_NUM_THREADS:-1}}"
  read -r -a run <<< "$RUN"
  if [[ "${run[3]:-}" == tune ]]; then tune_one "${run[@]:0:3}"; else run_one "${run[@]}"; fi
  exit 0
fi

run_all() {  # lines "CONFIG SEED LR" on standard input, run --jobs at a time, with this study's options
  local records=()
  [[ -z "$RECORD_DIR" ]] || records=(--record-dir "$RECORD_DIR")
  [[ -z "$UNFINISHED_DIR" ]] || records+=(--unfinished-dir "$UNFINISHED_DIR")
  xargs -r -P "$JOBS" -d '\n' -I{} "$0" --work-dir "$WORK_DIR" --max-epoch "$MAX_EPOCH" --patience "$PATIENCE" \
    --tune-epochs "$TUNE_EPOCHS" --adaptive "$ADAPTIVE" --gpus "$GPUS" --seeds "$SEEDS" --residual-lr "$RESIDUAL_LR" \
    --residual-share "$RESIDUAL_SHARE" "${records[@]}" --run {} -- "${TRAIN_EXTRA[@]}" \
    || die "some runs failed (messages above); rerun to resume"
}

lock_dir "$WORK_DIR"
log "prepare the corpus (the whole log: $WORK_DIR/prepare.log)"
"$HERE/prepare.sh" --work-dir "$WORK_DIR" "${PREPARE_ARGS[@]}" 2>> "$WORK_DIR/prepare.log" \
  || die "preparing the corpus failed; see $WORK_DIR/prepare.log"
TUNE_SEED="${SEEDS%% *}"
TABLE=(python "$HERE/lm_study_table.py" --grid-dir "$WORK_DIR/grid" --tune-seed "$TUNE_SEED" --tuned $TUNED
  --tune-lrs $TUNE_LRS --tune-epochs "$TUNE_EPOCHS" --max-epoch "$MAX_EPOCH" --patience "$PATIENCE")
if [[ "$KEEP_UNFINISHED" == 1 ]]; then
  for save_dir in "$WORK_DIR"/grid/*/lr*/seed*; do
    IFS=/ read -r config lr seed <<< "${save_dir#"$WORK_DIR/grid/"}"
    lr="${lr#lr}" seed="${seed#seed}"
    [[ -e "$save_dir/checkpoint_last.pt" && ! -d "$RECORD_DIR/grid/$config/lr$lr/seed$seed" ]] || continue
    if [[ " $TUNED " == *" $config "* && "$seed" == "$TUNE_SEED" ]] \
      && best="$("${TABLE[@]}" --best "$config" 2> /dev/null)" && [[ "$best" != "$lr" ]]; then
      continue  # a tried lr that lost: it never trains on
    fi
    keep_unfinished "$config" "$seed" "$lr"
  done
  exit 0
fi
if [[ "$SPEED_CHECK" -gt 0 ]]; then
  export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}" MKL_NUM_THREADS="${MKL_NUM_THREADS:-${OMP_NUM_THREADS:-1}}"
  for config in $CONFIGS; do
    log "speed check: $config, $SPEED_CHECK updates"
    rm -rf "$WORK_DIR/speed/$config" && mkdir -p "$WORK_DIR/speed"
    train_config "$config" "$WORK_DIR/speed/$config" --max-update "$SPEED_CHECK" \
      > "$WORK_DIR/speed/$config.stdout" 2>&1 || die "the speed check of $config failed; see $WORK_DIR/speed/$config/train.log"
    rm -f "$WORK_DIR/speed/$config"/*.pt  # only the log is read
  done
  "${TABLE[@]}" --speed-dir "$WORK_DIR/speed" --configs $CONFIGS --seeds $SEEDS --jobs "$JOBS" \
    > "$WORK_DIR/speed.md.tmp" || { rm -f "$WORK_DIR/speed.md.tmp"; die "could not read the speed check's logs"; }
  publish "$WORK_DIR/speed.md.tmp" "$WORK_DIR/speed.md"
  cat "$WORK_DIR/speed.md"
  exit 0
fi
log "tuning: peak lr over $TUNE_LRS for $TUNED (seed $TUNE_SEED, $TUNE_EPOCHS epochs each)"
for config in $TUNED; do
  for lr in $TUNE_LRS; do echo "$config $TUNE_SEED $lr tune"; done
done | run_all
declare -A LR=()
for config in $TUNED; do
  LR[$config]="$("${TABLE[@]}" --best "$config")" || die "could not pick the lr of $config"
done
SHARED_LR="${LR[rk2_learned]:-${LR[${TUNED%% *}]}}"
for config in $CONFIGS; do LR[$config]="${LR[$config]:-$SHARED_LR}"; done
log "learning rates: $(for config in $CONFIGS; do printf '%s %s; ' "$config" "${LR[$config]}"; done)"
# Configuration by configuration, in the priority order: a study stopped early (out of budget) has
# the first configurations complete, every seed, and lacks only the last ones.
for config in $CONFIGS; do
  for seed in $SEEDS; do echo "$config $seed ${LR[$config]}"; done
done | run_all
for config in $CONFIGS; do
  mkdir -p "$WORK_DIR/chosen"
  ln -sfn "../grid/$config/lr${LR[$config]}" "$WORK_DIR/chosen/$config"
  count_config_flops "$config" "${LR[$config]}"
done
"${TABLE[@]}" --chosen-dir "$WORK_DIR/chosen" --configs $CONFIGS --flops-dir "$WORK_DIR/flops" \
  --figure "$WORK_DIR/curves.png" --compute-figure "$WORK_DIR/compute.png" > "$WORK_DIR/results.md.tmp" \
  || { rm -f "$WORK_DIR/results.md.tmp"; die "could not summarise the runs"; }
publish "$WORK_DIR/results.md.tmp" "$WORK_DIR/results.md"
cat "$WORK_DIR/results.md"
