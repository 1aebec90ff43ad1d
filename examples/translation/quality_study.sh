#!/usr/bin/env bash
# Quality study on the bundled English→Spanish Bible corpus: residual 6-6, RK2 with learned
# coefficients 6-6, RK4 6-6 (ODE blocks in the encoder, as in the paper), a residual 24-6 model
# with the same layer evaluations as RK4 6-6, and the successors PCformer 6-6 (RK4 predictor with
# EMA weights, multistep corrector) and IIET 6-6 (3 iterations), and residual 6-6 trained to PCformer
# 6-6's training FLOPs (more updates, by the ratio of their counted FLOPs per token), each trained
# with several seeds, then averaged, decoded (beam 4) and scored; docs-ready table of mean ± standard
# deviation with each configuration's FLOPs, each seed's paired-bootstrap p-value against the
# residual 6-6 model of the same seed (and the compute-matched residual model against PCformer's).
# By default every configuration gets one recipe (--lr, --warmup). With --tune, each configuration's
# peak learning rate and warmup are first tuned on the validation set (final validation NLL of the
# first seed, training only): the peak lr over --tune-lrs at --warmup, then the warmup over
# --tune-warmups at the best lr; the comparison then trains every seed with each configuration's
# best setting (the tuning run of the first seed is reused). A warmup of --tune-warmups equal to
# --warmup is phase 1's own run, so `--tune-warmups WARMUP` tunes the lr alone. `--setting
# CONFIG=LR/WARMUP` gives a configuration its setting (an earlier tuning's choice) instead of tuning it.
# Runs go in parallel (--jobs), one thread each unless OMP_NUM_THREADS says otherwise; finished
# stages are reused when the study is rerun, so an interrupted study resumes with the same command.
# With --record-dir every run is also evaluated and its record (settings, data digest, training log,
# scores, translations; not its checkpoints) is kept there: a directory to commit, from which the
# study resumes in a fresh checkout or a later session, training only the runs without a record.
#
# Usage: quality_study.sh [options]
# Layout: every run is WORK_DIR/grid/CONFIG/lrLR-warmupN/seedS; WORK_DIR/runs/CONFIG (one recipe)
# and WORK_DIR/tuned/CONFIG (tuned) link to the setting each table reports.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
HERE="$REPO_ROOT/examples/translation"

use_project_python
# The configurations, their models and pairings: ode_seq/studies.py (CONFIG_ARCH, CONFIG_LAYERS: the encoder's
# layers, CONFIG_OPTIONS, CONFIG_COMPUTE_OF: trained to the training FLOPs of that configuration's --max-update
# updates, the ratio of their counted FLOPs per token rounded to whole --save-interval-updates; STUDY_SCHEDULE:
# the order runs start in, most expensive first; -P: this checkout's table, whatever the working directory).
STUDY="$(python -P -m ode_seq.studies shell translation)" || die "could not read the table of studies (message above)"
eval "$STUDY"

parse_options "$@" <<'EOF'
--work-dir=DIR        WORK_DIR       -          $REPO_ROOT/work-dirs/quality-study
--configs=LIST        CONFIGS        -          $STUDY_DEFAULT_CONFIGS  # in quotes, of the study's configurations
                                                # (ode_seq/studies.py; python -m ode_seq.studies list translation)
--seeds=LIST          SEEDS          positives  1 2 3     # in quotes: "1 2 3"
--max-update=N        MAX_UPDATE     positive   800       # updates per run
--max-tokens=N        MAX_TOKENS     positive   2048      # tokens per batch
--lr=LR               LR             number     2e-3      # inverse_sqrt peak
--warmup=N            WARMUP         positive   300       # its warmup
--tune                TUNE                                # tune lr and warmup per configuration first (see above)
--tune-lrs=LIST       TUNE_LRS       numbers    $STUDY_TUNE_LRS  # peak learning rates tried at --warmup
--tune-warmups=LIST   TUNE_WARMUPS   positives  $STUDY_TUNE_WARMUPS  # warmups tried at the best of them
--setting=CONFIG=LR/WARMUP  GIVEN_SETTINGS[]  -     # with --tune: CONFIG uses this setting, untuned (repeatable)
--embed-dim=D         EMBED_DIM      positive   128       # model width; FFN 4·D, D/32 heads
--save-interval-updates=K  SAVE_INTERVAL  positive  50    # checkpoint spacing; the newest 5 are averaged
--train-pairs|--valid-pairs|--test-pairs|--vocab-size|--workers=N  PREPARE_ARGS[]  forward  --vocab-size 4000
                                                # for prepare_bible.sh
--jobs=N              JOBS           positive   $(nproc)  # runs at a time, each with OMP_NUM_THREADS intra-op threads, 1 where that is
                                                          # unset (default: nproc)
--gpus=N              GPUS           gpus                 # 0 = train on the CPU, N > 1 = data-parallel on N GPUs, for every run
                                                          # (default: 1 if CUDA is visible, else 0)
--record-dir=DIR      RECORD_DIR                          # keep each finished run's record here and reuse it (see above)
--output=FILE         OUTPUT                              # the Markdown table (default: WORK_DIR/results.md, with --tune
                                                          # WORK_DIR/results-tuned.md; the tuning table is WORK_DIR/tuning.md)
--run=RUN             RUN                                 # one run of the study, "CONFIG SEED LR WARMUP STAGES" (the study runs them)
EOF
for config in $CONFIGS; do
  [[ -n "${CONFIG_ARCH[$config]:-}" ]] \
    || usage_error "unknown configuration '$config'; choose from: ${!CONFIG_ARCH[*]}"
done
declare -A GIVEN_LR=() GIVEN_WARMUP=()
for given in "${GIVEN_SETTINGS[@]}"; do
  [[ "$given" =~ ^([a-z0-9_]+)=([^/]+)/([1-9][0-9]*)$ ]] && config="${BASH_REMATCH[1]}" \
    lr="${BASH_REMATCH[2]}" warmup="${BASH_REMATCH[3]}" && [[ "$lr" =~ $NUMBER ]] \
    || usage_error "--setting takes CONFIG=LR/WARMUP such as residual_6_6=4e-3/300, got '$given'"
  [[ " $CONFIGS " == *" $config "* ]] \
    || usage_error "--setting $given names $config, which is not in --configs ($CONFIGS)"
  GIVEN_LR[$config]="$lr" GIVEN_WARMUP[$config]="$warmup"
done
(( ${#GIVEN_SETTINGS[@]} == 0 || TUNE )) || usage_error "--setting is for --tune (without it every \
configuration uses --lr and --warmup)"
(( MAX_UPDATE >= 5 * SAVE_INTERVAL )) || usage_error "--max-update $MAX_UPDATE saves fewer than the 5 \
checkpoints that are averaged; give at least 5 × --save-interval-updates ($SAVE_INTERVAL) updates"
(( EMBED_DIM % 32 == 0 )) \
  || usage_error "--embed-dim must be a multiple of 32 (one head per 32 dimensions), got $EMBED_DIM"
[[ -z "$RUN" ]] || check_run_option "$RUN" CONFIG=keys:CONFIG_ARCH SEED=positive LR=number WARMUP=positive \
  STAGES='all|train'
[[ -z "$RECORD_DIR" ]] || check_record_dir "$RECORD_DIR"
GPUS="${GPUS:-$(default_gpus)}"
lock_dir "$WORK_DIR"

recipe() {  # recipe LR WARMUP [UPDATES] — the settings line a run directory records
  echo "max_update=${3:-$MAX_UPDATE} max_tokens=$MAX_TOKENS lr=$1 warmup=$2 embed_dim=$EMBED_DIM"
}

model_options() {  # model_options CONFIG — train_bible.sh's options of the configuration's model
  echo "--arch ${CONFIG_ARCH[$1]} -- --encoder-layers ${CONFIG_LAYERS[$1]} --decoder-layers 6 \
--encoder-embed-dim $EMBED_DIM --decoder-embed-dim $EMBED_DIM --encoder-ffn-embed-dim $((4 * EMBED_DIM)) \
--decoder-ffn-embed-dim $((4 * EMBED_DIM)) --encoder-attention-heads $((EMBED_DIM / 32)) \
--decoder-attention-heads $((EMBED_DIM / 32)) ${CONFIG_OPTIONS[$1]:-}"
}

flops_file() {  # flops_file CONFIG — its counted FLOPs per token (count_config_flops)
  echo "$WORK_DIR/flops/$1.txt"
}

count_config_flops() {  # count_config_flops CONFIG — `ode-seq flops` of its first batch, once
  run_stage "$(flops_file "$1")" "the FLOPs per token of $1" || return 0
  # shellcheck disable=SC2046  # the model's options are words
  "$HERE/train_bible.sh" --data-bin "$WORK_DIR/data-bin" --max-update "$MAX_UPDATE" --minutes 0 \
    --max-tokens "$MAX_TOKENS" --gpus "$GPUS" --count-flops "$(flops_file "$1")" $(model_options "$1")
}

config_updates() {  # config_updates CONFIG — its updates: --max-update, or those that spend the training FLOPs
  local of="${CONFIG_COMPUTE_OF[$1]:-}"  # of CONFIG_COMPUTE_OF's --max-update updates
  [[ -n "$of" ]] || { echo "$MAX_UPDATE"; return; }
  python -c "import sys; from pathlib import Path; from ode_seq.analysis.flops import FlopCount
mine, theirs = (FlopCount.parse(Path(p).read_text(), p).training_per_token for p in sys.argv[1:3])
interval = int(sys.argv[4]); print(interval * round(int(sys.argv[3]) * theirs / mine / interval))" \
    "$(flops_file "$1")" "$(flops_file "$of")" "$MAX_UPDATE" "$SAVE_INTERVAL"
}

setting_dir() {  # setting_dir CONFIG LR WARMUP — the directory of one setting's seeds
  echo "$WORK_DIR/grid/$1/lr$2-warmup$3"
}

data_id() {  # the digest of the data a run's scores depend on: dictionaries, training pairs, test references
  content_id "$WORK_DIR"/data-bin/dict.{en,es}.txt "$WORK_DIR"/data-bin/train.en-es.{en,es}.idx "$WORK_DIR/raw/test.es"
}

run_one() {  # run_one CONFIG SEED LR WARMUP STAGES — train; with STAGES=all (or --record-dir) also average the newest
  local config="$1" seed="$2" lr="$3" warmup="$4" stages="$5"  # 5 checkpoints, decode, score
  local save_dir record="" updates
  save_dir="$(setting_dir "$config" "$lr" "$warmup")/seed$seed"
  updates="$(config_updates "$config")" || die "no FLOP count of $config: rerun the study"
  [[ -z "$RECORD_DIR" ]] || record="$RECORD_DIR/grid/$config/lr$lr-warmup$warmup/seed$seed"
  if [[ -n "$record" ]] && restore_run "$record" "$save_dir" run-config.txt "$(recipe "$lr" "$warmup" "$updates")" \
    "$(data_id)"; then
    touch "$save_dir/train.done"  # only a finished run has a record; the tuning table reads this mark
    log "reused the record of $config seed $seed (lr $lr, warmup $warmup): $record"
    return
  fi
  check_run_config "$save_dir" "$(recipe "$lr" "$warmup" "$updates")"
  # shellcheck disable=SC2046  # the model's options are words
  "$HERE/train_bible.sh" --data-bin "$WORK_DIR/data-bin" \
    --save-dir "$save_dir" --minutes 0 --max-update "$updates" \
    --max-tokens "$MAX_TOKENS" --lr "$lr" --warmup "$warmup" --seed "$seed" \
    --save-interval-updates "$SAVE_INTERVAL" --gpus "$GPUS" $(model_options "$config") \
    > "$save_dir/train.stdout" 2>&1 || die "training $config seed $seed failed; see $save_dir/train.log"
  if [[ "$stages" == all || -n "$record" ]]; then
    bible_test_scores "$WORK_DIR" "$save_dir" "$GPUS" -- --max-len-a 1.5 --max-len-b 10
  fi
  if [[ -n "$record" ]]; then
    data_id > "$save_dir/data-id.txt"
    record_run "$save_dir" "$record" run-config.txt data-id.txt train.log eval-test/scores.json \
      eval-test/generate-test.txt
  fi
  log "finished $config seed $seed (lr $lr, warmup $warmup)"
}

if [[ -n "$RUN" ]]; then
  # One run: OMP_NUM_THREADS intra-op threads where it is set, else one (--jobs run at a time).
  export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}" MKL_NUM_THREADS="${MKL_NUM_THREADS:-${OMP_THREADS:-1}}"
  read -r -a run <<< "$RUN"
  run_one "${run[@]}"
  exit 0
fi

run_all() {  # lines "CONFIG SEED LR WARMUP STAGES" on standard input, run --jobs at a time
  local records=()
  [[ -z "$RECORD_DIR" ]] || records=(--record-dir "$RECORD_DIR")
  xargs -r -P "$JOBS" -d '\n' -n 1 "$0" --work-dir "$WORK_DIR" --max-update "$MAX_UPDATE" \
    --max-tokens "$MAX_TOKENS" --embed-dim "$EMBED_DIM" --save-interval-updates "$SAVE_INTERVAL" \
    --gpus "$GPUS" "${records[@]}" --run \
    || die "some runs failed (messages above); rerun to resume"
}

link_view() {  # link_view VIEW CONFIG LR WARMUP — VIEW/CONFIG points at that setting's seeds
  mkdir -p "$WORK_DIR/$1"
  ln -sfn "../grid/$2/lr$3-warmup$4" "$WORK_DIR/$1/$2"
}

ordered_configs() {  # ordered_configs [tuned] — the configurations of --configs, most expensive first;
  local config         # with `tuned`, those without a --setting
  for config in $STUDY_SCHEDULE; do
    [[ " $CONFIGS " == *" $config "* ]] || continue
    [[ "${1:-}" != tuned || -z "${GIVEN_LR[$config]:-}" ]] || continue
    echo "$config"
  done
}

"$HERE/prepare_bible.sh" --work-dir "$WORK_DIR" "${PREPARE_ARGS[@]}"
for config in $CONFIGS; do
  for counted in "$config" ${CONFIG_COMPUTE_OF[$config]:-}; do count_config_flops "$counted"; done
done
declare -A BEST_LR=() BEST_WARMUP=()
if [[ "$TUNE" == 1 ]]; then
  TUNE_SEED="${SEEDS%% *}"
  tuning_best() {  # tuning_best CONFIG "LR/WARMUP ..." — sets BEST_LR and BEST_WARMUP of CONFIG to
    local best       # the setting of lowest final validation NLL
    best="$(python "$HERE/tuning_table.py" --grid-dir "$WORK_DIR/grid" --seed "$TUNE_SEED" --best "$1" \
      --settings $2)" || die "could not pick the best setting of $1"
    read -r BEST_LR[$1] BEST_WARMUP[$1] <<< "$best"
  }
  log "tuning phase 1: peak lr over $TUNE_LRS at warmup $WARMUP (seed $TUNE_SEED, training only)"
  TUNED_CONFIGS="$(ordered_configs tuned)"
  WARMUPS_LEFT="$(for warmup in $TUNE_WARMUPS; do [[ "$warmup" == "$WARMUP" ]] || echo "$warmup"; done)"
  for config in $TUNED_CONFIGS; do
    for lr in $TUNE_LRS; do echo "$config $TUNE_SEED $lr $WARMUP train"; done
  done | run_all
  declare -A SETTINGS=()
  for config in $TUNED_CONFIGS; do
    SETTINGS[$config]="$(for lr in $TUNE_LRS; do printf '%s/%s ' "$lr" "$WARMUP"; done)"
    tuning_best "$config" "${SETTINGS[$config]}"
  done
  if [[ -n "$WARMUPS_LEFT" ]]; then
    log "tuning phase 2: warmup over" $WARMUPS_LEFT "at each configuration's best lr"
    for config in $TUNED_CONFIGS; do
      for warmup in $WARMUPS_LEFT; do echo "$config $TUNE_SEED ${BEST_LR[$config]} $warmup train"; done
    done | run_all
    for config in $TUNED_CONFIGS; do
      SETTINGS[$config]+="$(for warmup in $WARMUPS_LEFT; do printf '%s/%s ' "${BEST_LR[$config]}" "$warmup"; done)"
      tuning_best "$config" "${SETTINGS[$config]}"
    done
  fi
  if [[ -n "$TUNED_CONFIGS" ]]; then
    python "$HERE/tuning_table.py" --grid-dir "$WORK_DIR/grid" --seed "$TUNE_SEED" \
      $(for config in $TUNED_CONFIGS; do printf -- '--config %s %s ' "$config" "${SETTINGS[$config]}"; done) \
      > "$WORK_DIR/tuning.md.tmp" || { rm -f "$WORK_DIR/tuning.md.tmp"; die "could not summarise the tuning"; }
    publish "$WORK_DIR/tuning.md.tmp" "$WORK_DIR/tuning.md"
    cat "$WORK_DIR/tuning.md"
  fi
  for config in "${!GIVEN_LR[@]}"; do BEST_LR[$config]="${GIVEN_LR[$config]}" BEST_WARMUP[$config]="${GIVEN_WARMUP[$config]}"; done
  VIEW=tuned
  OUTPUT="${OUTPUT:-$WORK_DIR/results-tuned.md}"
  RECIPE="max_update=$MAX_UPDATE max_tokens=$MAX_TOKENS embed_dim=$EMBED_DIM, lr and warmup tuned per configuration \
on seed $TUNE_SEED's validation NLL: $(for config in $CONFIGS; do printf '%s lr=%s warmup=%s%s; ' "$config" \
"${BEST_LR[$config]}" "${BEST_WARMUP[$config]}" "${GIVEN_LR[$config]:+ (given by --setting)}"; done)"
  RECIPE="${RECIPE%; }"
else
  for config in $CONFIGS; do BEST_LR[$config]="$LR"; BEST_WARMUP[$config]="$WARMUP"; done
  VIEW=runs
  OUTPUT="${OUTPUT:-$WORK_DIR/results.md}"
  RECIPE="$(recipe "$LR" "$WARMUP")"
fi

# Seed-major order: an interrupted comparison stays balanced across configurations.
for seed in $SEEDS; do
  for config in $(ordered_configs); do
    echo "$config $seed ${BEST_LR[$config]} ${BEST_WARMUP[$config]} all"
  done
done | run_all
for config in $CONFIGS; do link_view "$VIEW" "$config" "${BEST_LR[$config]}" "${BEST_WARMUP[$config]}"; done

python "$HERE/study_table.py" --runs-dir "$WORK_DIR/$VIEW" --configs $CONFIGS --recipe "$RECIPE" \
  --flops-dir "$WORK_DIR/flops" --compute-figure "${OUTPUT%.md}-compute.png" \
  --ref "$WORK_DIR/raw/test.es" --lang es > "$OUTPUT.tmp" || { rm -f "$OUTPUT.tmp"; die "could not summarise the runs"; }
publish "$OUTPUT.tmp" "$OUTPUT"
cat "$OUTPUT"
