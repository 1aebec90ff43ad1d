# The shell library of every pipeline under examples/; sourced, not executed.
# The contract: flags only (each script declares them in one table, read by parse_options), `-h`/
# `--help` prints the script's header comment and its options, a usage error prints
# `SCRIPT: error: …` and exits 2, a failure of the work exits 1. Every stage writes to
# "$target.tmp" (file or directory) and renames it when complete, so an existing target is always
# complete and its stage is skipped on reruns. One run at a time writes into a directory (lock_dir).

# The environment: no generic name (PYTHON, ARCH, CPU, BEAM, …) changes what a pipeline does, since
# every variable of a script is set from its table or in the script. What the pipelines read:
# ODE_SEQ_VENV (use_project_python), PATH, PYTHONPATH (after the repository), OMP_NUM_THREADS
# (threads of each process; checked below), and through torch CUDA_VISIBLE_DEVICES.
unset CDPATH  # with CDPATH set, `cd DIR` may go elsewhere and prints where it went
REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$REPO_ROOT/scripts/supervise.sh"  # a stop (SIGTERM, SIGINT, SIGHUP) ends every process the script started
SCRIPT_NAME="$(basename "$0")"
export PYTHONPATH="$REPO_ROOT${PYTHONPATH:+:$PYTHONPATH}"

die() {  # die MESSAGE — the work failed: exit 1
  echo "$SCRIPT_NAME: error: $*" >&2
  stage_failed 1
  exit 1
}

usage_error() {  # usage_error MESSAGE — the command line is wrong: exit 2
  echo "$SCRIPT_NAME: error: $*" >&2
  exit 2
}

log() {
  echo "[$(date +%H:%M:%S)] $*" >&2
}

# Options. A script's table, one row a flag, on the standard input of parse_options:
#   --flag=META   VARIABLE   CHECK   DEFAULT…   # help (a row that is only `# …` continues it)
# VARIABLE is set to DEFAULT (expanded as in double quotes: "$REPO_ROOT/…", "$(nproc)"), then to the
# flag's value. A flag without =META is a switch: 0, or 1 when given. VARIABLE[] is an array: the
# words of DEFAULT, then each value of a repeated flag; with CHECK `forward` (`--a|--b=N VAR[] forward`)
# the given flag goes in before its value, to be passed on. The row `--=WORDS VAR[]` takes every word
# after `--`. CHECK (`-` for none): whole, positive, number; positives or numbers (lists of them);
# gpus, decoding-gpus; A|B (one of); keys:ARRAY (a key of that associative array); is-now:--flag (a
# renamed flag, not listed by --help). DEFAULT `required`: the flag must be given.
OPTION_ROWS=()
declare -gA OPTION_VARIABLE=() OPTION_CHECK=() OPTION_TAKES_VALUE=()
NUMBER='^([0-9]+([.][0-9]*)?|[.][0-9]+)([eE][-+]?[0-9]+)?$'

parse_options() {  # parse_options "$@" < TABLE — set each row's VARIABLE from its default and the command line
  read_option_table
  set_options "$@"
  check_options
}

read_option_table() {  # read_option_table < TABLE — keep its rows, map each flag to its row, set the defaults
  local row flag var check default name names=()
  while IFS= read -r row; do
    [[ ! "$row" =~ [^[:space:]] ]] || OPTION_ROWS+=("$row")
    read -r flag var check default <<< "${row%%#*}"
    [[ -n "$flag" ]] || continue
    IFS='|' read -r -a names <<< "${flag%%=*}"
    for name in "${names[@]}"; do
      OPTION_VARIABLE[$name]="$var" OPTION_CHECK[$name]="$check" OPTION_TAKES_VALUE[$name]="${flag//[^=]/}"
    done
    if [[ "$var" == - ]]; then
      continue
    elif [[ "$var" == *'[]' ]]; then
      eval "${var%'[]'}=($default)"
    elif [[ "$flag" != *=* ]]; then
      printf -v "$var" 0
    elif [[ "$default" == required ]]; then
      printf -v "$var" '%s' ""
    else
      eval "$var=\"$default\""
    fi
  done
}

set_options() {  # set_options "$@" — the command line, flag by flag, into the variables of the table
  local var check
  while [[ $# -gt 0 ]]; do
    [[ "$1" != -h && "$1" != --help ]] || { usage; exit 0; }
    [[ -n "$1" && -n "${OPTION_VARIABLE[$1]+set}" ]] || unknown_option "$1"
    var="${OPTION_VARIABLE[$1]}" check="${OPTION_CHECK[$1]}"
    [[ "$check" != is-now:* ]] || usage_error "$1 is now ${check#is-now:}"
    if [[ "$1" == -- ]]; then
      shift
      eval "${var%'[]'}=(\"\$@\")"
      return
    elif [[ -z "${OPTION_TAKES_VALUE[$1]}" ]]; then
      printf -v "$var" 1
      shift
      continue
    fi
    require_option_value "$@"
    case "$check $var" in
      "forward "*) eval "${var%'[]'}+=(\"\$1\" \"\$2\")" ;;
      *'[]') eval "${var%'[]'}+=(\"\$2\")" ;;
      *) printf -v "$var" '%s' "$2" ;;
    esac
    shift 2
  done
}

check_options() {  # check_options — every required flag given, every value passes its row's CHECK
  local row flag var check default missing=() checks=()
  for row in "${OPTION_ROWS[@]}"; do
    read -r flag var check default <<< "${row%%#*}"
    [[ "$flag" == *=* && "$var" != *'[]' && "$var" != - ]] || continue
    if [[ -n "${!var}" ]]; then
      checks+=("${flag%%[|=]*}" "$check" "${!var}")
    elif [[ "$default" == required ]]; then
      missing+=("${flag%%[|=]*}")
    fi
  done
  [[ ${#missing[@]} -eq 0 ]] || usage_error "$(words_and "${missing[@]}") \
$([[ ${#missing[@]} -eq 1 ]] && echo is || echo are) required (see --help)"
  while [[ ${#checks[@]} -gt 0 ]]; do
    check_option "${checks[@]:0:3}"
    checks=("${checks[@]:3}")
  done
}

check_option() {  # check_option FLAG CHECK VALUE — a usage error unless VALUE passes CHECK
  local flag="$1" check="$2" value="$3" word words=()
  case "$check" in
    -|''|forward) ;;
    whole) require_whole "$flag" "$value" ;;
    positive) require_positive "$flag" "$value" ;;
    number) [[ "$value" =~ $NUMBER ]] || usage_error "$flag must be a non-negative number such as 2e-3, got '$value'" ;;
    positives|numbers)
      read -r -a words <<< "$value"
      [[ ${#words[@]} -gt 0 ]] || usage_error "$flag needs at least one value"
      for word in "${words[@]}"; do
        if [[ "$check" == positives ]]; then
          [[ "$word" =~ ^[1-9][0-9]*$ ]] || usage_error "$flag takes positive whole numbers, got '$word'"
        else
          [[ "$word" =~ $NUMBER ]] || usage_error "$flag takes numbers such as 2e-3, got '$word'"
        fi
      done ;;
    gpus) require_gpus "$value" ;;
    decoding-gpus) require_gpus "$value" decoding ;;
    keys:*)
      local -n table="${check#keys:}"
      [[ -n "${table[$value]+set}" ]] \
        || usage_error "$flag must be $(words_or $(printf '%s\n' "${!table[@]}" | sort)), got $value" ;;
    *'|'*)
      [[ "|$check|" == *"|$value|"* ]] || usage_error "$flag must be $(words_or ${check//|/ }), got $value" ;;
    *) die "the option table names an unknown check '$check' for $flag" ;;
  esac
}

check_run_option() {  # check_run_option RUN NAME=CHECK... [[WORD]] — a usage error unless RUN, a --run value,
  local run="$1" spec usage="" words=() i=0  # holds one word per NAME=CHECK (check_option's CHECKs), then
  shift  # optionally the word WORD of a last spec [WORD]
  for spec in "$@"; do usage+="${spec%%=*} "; done
  usage="--run takes \"${usage% }\""
  read -r -a words <<< "$run"
  [[ ${#words[@]} -le $# ]] || usage_error "$usage, got '$run'"
  for spec in "$@"; do
    if [[ "$spec" == '['*']' ]]; then
      [[ -z "${words[i]:-}" || "${words[i]}" == "${spec:1:-1}" ]] \
        || usage_error "$usage: its last word can only be ${spec:1:-1}, got '$run'"
    else
      [[ -n "${words[i]:-}" ]] || usage_error "$usage, got '$run', without ${spec%%=*}"
      check_option "--run's ${spec%%=*}" "${spec#*=}" "${words[i]}"
    fi
    i=$((i + 1))
  done
}

words_and() {  # words_and A B C — "A, B and C"
  local all="$*"
  [[ $# -gt 1 ]] && all="${*:1:$#-1}" && all="${all// /, } and ${!#}"
  echo "$all"
}

words_or() {  # words_or A B C — "A or B", "one of A, B, C"
  if [[ $# -eq 2 ]]; then echo "$1 or $2"; else local all="$*"; echo "one of ${all// /, }"; fi
}

usage() {  # the header comment (the lines after the shebang, without '# '), then the options
  awk 'NR > 1 { if (!/^#/) exit; sub(/^# ?/, ""); print }' "$0"
  local row flag var check default help meta name names=() label entry="" shown=""
  for row in "${OPTION_ROWS[@]}" --end; do
    help=""
    [[ "$row" != *'#'* ]] || help="${row#*#}"
    help="${help# }"
    read -r flag var check default <<< "${row%%#*}"
    if [[ -z "$flag" ]]; then
      entry="${entry%"${entry##*[! ]}"}"$'\n'"$(printf '%24s' '')$help"
      continue
    fi
    [[ "$entry" != *'(default'* ]] || shown=""
    [[ -z "$entry" ]] || echo "$entry${shown:+$([[ "$entry" == *' ' ]] || echo ' ')(default: $shown)}"
    entry="" shown=""
    [[ "$flag" != --end && "$check" != is-now:* ]] || continue
    IFS='|' read -r -a names <<< "${flag%%=*}"
    meta=""
    [[ "$flag" != *=* ]] || meta=" ${flag#*=}"
    label=""
    for name in "${names[@]}"; do label+="$name$meta "; done
    entry="$(printf '  %-20s  ' "${label% }")$help"
    if [[ -n "$default" && "$default" != required ]]; then
      eval "shown=\"$default\""
      shown="${shown#"$REPO_ROOT/"}"
    fi
  done
}

unknown_option() {  # unknown_option ARG — the catch-all of every option loop
  usage_error "unknown option $1 (see --help)"
}

require_option_value() {  # require_option_value OPTION "$@" — the value after OPTION must exist
  [[ $# -ge 2 && -n "$2" ]] || usage_error "option $1 needs a value"
}

require_whole() {  # require_whole OPTION VALUE — a whole number ≥ 0
  [[ "$2" =~ ^[0-9]+$ ]] || usage_error "$1 must be a whole number, got '$2'"
}

require_positive() {  # require_positive OPTION VALUE — a whole number ≥ 1
  [[ "$2" =~ ^[1-9][0-9]*$ ]] || usage_error "$1 must be a positive whole number, got '$2'"
}

refuse_environment() {  # refuse_environment VAR=REPLACEMENT ... — old interfaces are usage errors
  local pair var
  for pair in "$@"; do
    var="${pair%%=*}"
    [[ -z "${!var+set}" ]] || usage_error "the environment variable $var is no longer read; use \
${pair#*=} instead (and unset $var)"
  done
}

use_project_python() {  # put the project's virtual environment first on PATH, or fail clearly
  local venv="${ODE_SEQ_VENV:-$REPO_ROOT/.venv}"
  if [[ -x "$venv/bin/python" ]]; then
    [[ "$PATH" == "$venv/bin:"* ]] || export PATH="$venv/bin:$PATH"
    return 0
  fi
  if [[ -n "${ODE_SEQ_VENV:-}" ]]; then
    die "ODE_SEQ_VENV=$ODE_SEQ_VENV holds no bin/python; run bash scripts/setup.sh first (or set \
ODE_SEQ_VENV to the project's virtual environment)"
  fi
  python -c 'import fairseq, ode_seq' > /dev/null 2>&1 \
    || die "no virtual environment at $venv, and no python on PATH that imports fairseq and ode_seq: \
run bash scripts/setup.sh first (or set ODE_SEQ_VENV)"
}

default_gpus() {  # print 1 when torch sees a CUDA device, else 0 (after use_project_python); without
  # a GPU's device file (NVIDIA's /dev/nvidia0…, ROCm's /dev/kfd, WSL's /dev/dxg) it sees none, and
  # torch's import (seconds) is skipped
  if ! compgen -G '/dev/nvidia[0-9]*' > /dev/null && [[ ! -e /dev/kfd && ! -e /dev/dxg ]]; then
    echo 0
    return
  fi
  python -c 'import torch; print(int(torch.cuda.is_available()))' 2>/dev/null \
    || die "python could not import torch to look for a GPU; pass --gpus N"
}

require_gpus() {  # require_gpus VALUE [decoding] — --gpus is a whole number (0 or 1 for decoding)
  require_whole --gpus "$1"
  [[ -z "${2:-}" || "$1" -le 1 ]] || usage_error "--gpus must be 0 or 1: decoding runs on one device, got $1"
}

train_device_options() {  # train_device_options GPUS [FP16] — fairseq-train options: 0 = the CPU,
  if [[ "$1" -eq 0 ]]; then  # N = N GPUs (in mixed precision when FP16 is 1)
    echo --cpu
  elif [[ "${2:-0}" == 1 ]]; then
    echo --distributed-world-size "$1" --fp16
  else
    echo --distributed-world-size "$1"
  fi
}

start_training() {  # start_training SAVE_DIR NAME DICT HINT — before a training stage: the project's
  use_project_python  # python first on PATH, the data's DICT present (else HINT), SAVE_DIR held for this run;
  require_file "$3" "$4"  # exits 0 (logging "skip") when SAVE_DIR/train.done marks the run finished
  lock_dir "$1"
  run_stage "$1/train.done" "training $2" || exit 0
}

run_training() {  # run_training SAVE_DIR COMMAND... — its output also goes to SAVE_DIR/train.log;
  local save_dir="$1"  # SAVE_DIR/train.done marks a finished run
  shift
  mkdir -p "$save_dir"
  "$@" 2>&1 | tee -a "$save_dir/train.log" \
    || die "fairseq-train failed (its output is above and in $save_dir/train.log)"
  require_file "$save_dir/checkpoint_last.pt" "fairseq-train stopped before saving; see $save_dir/train.log"
  touch "$save_dir/train.done"
}

count_flops() {  # count_flops FILE DATA [fairseq-train options] — the counted FLOPs per token of the first batch
  local file="$1"  # that this training would see (ode-seq flops), into FILE; nothing is trained
  shift
  mkdir -p "$(dirname "$file")"
  ode-seq flops "$@" --user-dir "$REPO_ROOT/user_dir" > "$file.tmp.$$" 2> "$file.log" \
    || die "counting the FLOPs failed; see $file.log"
  publish "$file.tmp.$$" "$file"  # (two runs that count at once each write a whole file)
}

# The pipelines on the bundled Bible corpus score a run so: average SAVE_DIR's newest (up to 5) update
# checkpoints (or take its last when it saved fewer than 2), translate the test set of prepare_bible.sh's
# WORK_DIR (data-bin, raw/test.es) and score it into SAVE_DIR/eval-test.
bible_test_scores() {  # bible_test_scores WORK_DIR SAVE_DIR GPUS [-- generate options]
  local saved average=(--average-last 1)
  saved="$(find "$2" -maxdepth 1 -name 'checkpoint_*_*.pt' | wc -l)"
  [[ "$saved" -lt 2 ]] || average=(--average-last "$((saved < 5 ? saved : 5))" --checkpoint-kind update)
  "$REPO_ROOT/examples/translation/evaluate.sh" --data-bin "$1/data-bin" --checkpoint-dir "$2" \
    --gpus "$(($3 > 0))" --ref "$1/raw/test.es" --lang es "${average[@]}" "${@:4}" > /dev/null
}

trained_lm_options() {  # the first rows of the option tables of the scripts that read a trained
  cat <<'EOF'  # language model (examples/language_modeling/evaluate.sh, sample.sh); trained_lm reads them
--work-dir=DIR        WORK_DIR      -         $REPO_ROOT/work-dirs/lm-bible  # prepare.sh's and train.sh's work dir
--data-bin=DIR        DATA_BIN                          # binarised data (default: WORK_DIR/data-bin)
--arch=NAME           ARCH          -         ode_transformer_lm_rk2_learned  # the trained architecture: finds its checkpoints
--checkpoint-dir=DIR  CHECKPOINT_DIR                    # the run's checkpoints (default: WORK_DIR/checkpoints/ARCH)
--checkpoint=WHICH    CHECKPOINT    best|last  best     # checkpoint_best.pt (lowest validation loss) or checkpoint_last.pt
EOF
}

trained_lm() {  # trained_lm — after parse_options of trained_lm_options and --gpus: DATA_BIN, CHECKPOINT_DIR,
  DATA_BIN="${DATA_BIN:-$WORK_DIR/data-bin}"  # the checkpoint MODEL, the project's python, GPUS and the
  CHECKPOINT_DIR="${CHECKPOINT_DIR:-$WORK_DIR/checkpoints/$ARCH}"  # decoding's DEVICE options; fails
  MODEL="$CHECKPOINT_DIR/checkpoint_$CHECKPOINT.pt"  # unless the data and the checkpoint exist
  use_project_python
  GPUS="${GPUS:-$(default_gpus)}"
  DEVICE=()
  [[ "$GPUS" -gt 0 ]] || DEVICE=(--cpu)
  require_file "$DATA_BIN/dict.txt" "run examples/language_modeling/prepare.sh first (or pass --data-bin)"
  require_file "$MODEL" "train a model into $CHECKPOINT_DIR first (examples/language_modeling/train.sh)"
}

require_file() {  # require_file PATH HINT
  [[ -s "$1" ]] || die "$1 is missing or empty; $2"
}

require_command() {  # require_command NAME HINT
  command -v "$1" >/dev/null 2>&1 || die "command '$1' not found; $2"
}

run_stage() {  # run_stage TARGET NAME — true (logs "run") when TARGET is missing, so the stage
  if [[ -e "$1" ]]; then  # runs; false (logs "skip") when TARGET exists
    log "skip $2: $1 exists"
    return 1
  fi
  log "run $2 → $1"
  STAGE_TARGET="$1" STAGE_NAME="$2"
}

# A stage that fails says what it leaves behind, also when the tool that failed cannot (a full
# disk ends most tools with a traceback): the outputs of the finished stages are intact, its own
# partial output (a .tmp) is never used, and, when the disk may be the cause, how much room there
# was to write: the free space of a file system short of it (under LOW_DISK_MIB), the file size
# limit where one is set. A disk with more room did not stop the stage (a tool that failed for want
# of space and removed its partial output names the space itself: ode-seq's tools, fairseq-train
# with the plugin), so its free space is not named: it would send the user to the wrong place.
STAGE_TARGET=""  # the output of the stage running now, and its name (set by run_stage)
STAGE_NAME=""
LOW_DISK_MIB=64

stage_failed() {  # stage_failed STATUS — from die and the ERR trap: report the stage that did not finish
  [[ -n "$STAGE_TARGET" && ! -e "$STAGE_TARGET" && "$BASH_SUBSHELL" -eq 0 ]] || return 0
  local dir="$STAGE_TARGET" free room=""
  while [[ ! -d "$dir" && "$dir" == */* ]]; do dir="${dir%/*}"; done
  free="$(df -Pk -- "${dir:-.}" 2>/dev/null | awk 'NR == 2 { print $4 }')" || free=""
  [[ -z "$free" || "$free" -ge $((LOW_DISK_MIB * 1024)) ]] || room=" The file system of $dir has $((free / 1024)) MiB free."
  [[ "$(ulimit -f)" == unlimited ]] || room+=" Files may not grow beyond $(ulimit -f) KiB here (ulimit -f)."
  echo "$SCRIPT_NAME: error: $STAGE_NAME did not finish (exit $1), so $STAGE_TARGET was not written.$room \
The outputs of the finished stages are intact and a partial output is never used: once the cause is \
fixed, the same command resumes." >&2
  STAGE_TARGET=""
}
set -o errtrace
trap 'stage_failed $?' ERR

publish() {  # publish TMP TARGET — atomically move a finished stage output into place
  mv -T "$1" "$2"
}

# Run records: what a study keeps of a finished run (its logs and scores, not its checkpoints) in a
# directory that can be committed, so that the study resumes in another checkout, on another machine
# or in a later session, with only the runs that have no record left to do. A record holds each
# file gzip-compressed (FILE.gz; zcat reads it) and, written last, its manifest MANIFEST.sha256: the
# sha256 of every other file (sha256sum's format: `cd RECORD && sha256sum -c MANIFEST.sha256`). A
# record is read only when its files are exactly those of its manifest, byte for byte: a damaged,
# edited or partial record stops the study, naming the cell to rerun; it is never read as a smaller
# study, nor trained over. Records written before manifests are sealed once (examples/seal_records.sh).
RECORD_MANIFEST=MANIFEST.sha256

record_run() {  # record_run RUN_DIR RECORD_DIR FILE... — the FILEs (paths under RUN_DIR) as RECORD_DIR, atomically
  local run_dir="$1" record="$2" file tmp
  tmp="$(dirname "$record")/.$(basename "$record").tmp"
  rm -rf "$tmp"
  for file in "${@:3}"; do
    [[ -s "$run_dir/$file" ]] || die "cannot record $run_dir: $file is missing or empty"
    mkdir -p "$tmp/$(dirname "$file")"
    gzip -9nc "$run_dir/$file" > "$tmp/$file.gz"
  done
  write_manifest "$tmp"
  rm -rf "$record"
  publish "$tmp" "$record"
}

check_record_dir() {  # check_record_dir DIR — a usage error unless DIR, a --record-dir, is a directory or
  local dir="$1"  # can be made one
  while [[ ! -e "$dir" && "$dir" == */* ]]; do dir="${dir%/*}"; done
  [[ ! -e "$dir" || -d "$dir" ]] || usage_error "--record-dir $1 cannot hold records: $dir is not a directory"
}

record_files() {  # record_files RECORD — the paths of RECORD's files but its manifest, NUL-terminated, sorted
  (cd "$1" && find . -type f ! -name "$RECORD_MANIFEST*" -printf '%P\0' | LC_ALL=C sort -z)
}

write_manifest() {  # write_manifest RECORD — RECORD/MANIFEST.sha256 of its files, atomically
  (cd "$1" && record_files . | xargs -0 -r sha256sum --) > "$1/$RECORD_MANIFEST.tmp" \
    || die "could not write the manifest of $1"
  publish "$1/$RECORD_MANIFEST.tmp" "$1/$RECORD_MANIFEST"
}

record_damage() {  # record_damage RECORD — each way RECORD's files differ from its manifest, one a line;
  local digest file  # nothing for a record that holds exactly its manifest's files
  local -A listed=()
  if [[ ! -f "$1/$RECORD_MANIFEST" ]]; then
    echo "it has no $RECORD_MANIFEST"
    return
  fi
  while read -r digest file; do
    if [[ ! "$digest" =~ ^[0-9a-f]{64}$ || -z "$file" ]]; then
      echo "its $RECORD_MANIFEST is damaged"
      return
    fi
    listed[$file]=1
    if [[ ! -f "$1/$file" ]]; then
      echo "$file is missing"
    elif [[ "$(sha256sum < "$1/$file")" != "$digest  -" ]]; then
      echo "$file is not the file recorded (its sha256 is not the manifest's)"
    fi
  done < "$1/$RECORD_MANIFEST"
  while IFS= read -r -d '' file; do
    [[ -n "${listed[$file]+set}" ]] || echo "$file is not in its $RECORD_MANIFEST"
  done < <(record_files "$1")
}

refuse_record() {  # refuse_record RECORD RUN_DIR PROBLEM — stop the study: RECORD cannot be read; rerun that cell
  local fix="rerun that cell: rm -r $1 $2, then the study's command"
  [[ "$3" != *"no $RECORD_MANIFEST"* ]] || fix="if it was written before records carried a manifest and \
you trust it, seal it once: examples/seal_records.sh --record-dir $1 (it checks that every file decompresses \
in full; give it the study's --record-dir to seal all its records); else $fix"
  die "the record $1 cannot be read: ${3//$'\n'/; }; nothing of it was used. To go on, $fix"
}

restore_run() {  # restore_run RECORD_DIR RUN_DIR RECIPE_FILE RECIPE DATA_ID — false without a record; else its files,
  local file recipe data damage  # decompressed, in RUN_DIR, once it proves complete (its manifest) and made with
  [[ -d "$1" ]] || return 1  # RECIPE (in RECIPE_FILE) on DATA_ID; a damaged record stops the study (refuse_record)
  damage="$(record_damage "$1")"
  [[ -z "$damage" ]] || refuse_record "$1" "$2" "$damage"
  recipe="$(gzip -dc "$1/$3.gz")" && data="$(gzip -dc "$1/data-id.txt.gz")" \
    || refuse_record "$1" "$2" "its $3.gz or data-id.txt.gz does not decompress"
  [[ "$recipe" == "$4" ]] || die "the record $1 was made with other settings ($recipe), not $4: use \
another --record-dir, or delete the record to rerun it"
  [[ "$data" == "$5" ]] || die "the record $1 was made on other data (digest $data, here $5): prepare \
the corpus with the options of the study that made it, use another --record-dir, or delete the record to rerun it"
  while IFS= read -r -d '' file; do
    file="${file#"$1"/}"
    mkdir -p "$2/$(dirname "$file")"
    gzip -dc "$1/$file" > "$2/${file%.gz}" || refuse_record "$1" "$2" "$file does not decompress"
  done < <(find "$1" -name '*.gz' -type f -print0)
}

check_not_newer() {  # check_not_newer SOURCE OUTPUT — refuse an OUTPUT made before SOURCE changed
  if [[ -e "$1" && -e "$2" && "$1" -nt "$2" ]]; then
    die "$1 changed after $2 was made from it: delete $(dirname "$2") or choose another output directory"
  fi
}

check_run_config() {  # check_run_config DIR TEXT [NAME] — refuse to mix outputs of different settings
  local file="$1/${3:-run-config.txt}"
  mkdir -p "$1"
  if [[ -e "$file" ]]; then
    if [[ "$(cat "$file")" != "$2" ]]; then
      die "$1 was prepared with other settings (see $file); use another work dir or delete it.
now:  $2"
    fi
  else
    printf '%s' "$2" > "$file.tmp"
    publish "$file.tmp" "$file"
  fi
}

# What a run-config records about its inputs: their contents, and the places of outputs relative to
# the directory that records them, so that a checkout or work dir moved or cloned elsewhere resumes
# while a changed input is refused.
content_id() {  # content_id FILE... — a digest of the files' contents (not of their names or places)
  local file
  for file in "$@"; do
    [[ -f "$file" && -r "$file" ]] || die "cannot read $file"
  done
  echo "sha256:$(for file in "$@"; do sha256sum < "$file"; done | sha256sum | cut -c1-16)"
}

data_bin_id() {  # data_bin_id DIR SUBSET — the content_id of a fairseq data-bin's dictionaries (dict.txt of a
  # language model's, dict.LANG.txt of a translation's) and SUBSET
  compgen -G "$1/$2.*" > /dev/null \
    || die "$1 holds no binarised subset '$2' (no $2.* files); binarise it with the prepare script"
  content_id "$1"/dict*.txt "$1/$2".*
}

path_from() {  # path_from DIR PATH — PATH relative to DIR (true as long as both move together)
  realpath -m --relative-to="$1" -- "$2"
}

# One run at a time in a directory: a second run (of any pipeline) on a directory that a run uses is
# refused, naming that run's PID. The lock is flock(2) on DIR/.pipeline.lock through a descriptor
# that the run and every process it starts hold, so the kernel releases it when the last of them
# ends, however it ends; the stages a run starts itself (which inherit the descriptor) share it.
lock_dir() {  # lock_dir DIR — hold DIR (made if missing) for this run, or fail naming the run holding it
  local lock link fd
  mkdir -p "$1"
  lock="$(realpath -- "$1")/.pipeline.lock"
  for link in /proc/$$/fd/*; do
    [[ "$(readlink -- "$link")" != "$lock" ]] || return 0
  done
  exec {fd}>> "$lock"
  # A run that was killed releases the lock when the last process it started has exited: wait a
  # little for those, not for a run that is still going.
  if ! flock --nonblock "$fd" && ! { ! run_alive "$lock" && flock --wait 10 "$fd"; }; then
    exec {fd}>&-
    die "$1 is in use by another run ($(lock_holder "$lock")); wait until it ends, or stop it, and rerun"
  fi
  echo "PID $$, $SCRIPT_NAME, started $(date '+%F %T')" > "$lock"
}

run_alive() {  # run_alive LOCK — true while the process that took LOCK still runs (a zombie does not)
  local pid stat
  pid="$(cat -- "$1")"
  pid="${pid#PID }"
  pid="${pid%%,*}"
  [[ "$pid" =~ ^[0-9]+$ ]] && stat="$(cat "/proc/$pid/stat" 2>/dev/null)" && [[ "${stat##*) }" != Z* ]]
}

lock_holder() {  # lock_holder LOCK — who holds LOCK: the run that took it, or the processes it left
  local taker pid
  taker="$(cat -- "$1")"
  if run_alive "$1"; then
    echo "$taker"
    return
  fi
  pid="PID $(find /proc/[0-9]*/fd -maxdepth 1 -lname "$1" 2>/dev/null | cut -d/ -f3 | sort -un | paste -sd' ')"
  if [[ -z "$taker" ]]; then
    echo "$pid, starting"
  else
    echo "$taker has ended, but processes it started still run: $pid"
  fi
}

# The translation scripts once read the architecture from ODE_SEQ_ARCH; no script reads it now.
refuse_environment ODE_SEQ_ARCH=--arch
# OMP_NUM_THREADS: intra-op threads of every process (torch's default when unset: one per core). A
# value that OpenMP cannot read would be passed over with a warning in a log, so it is refused.
[[ "${OMP_NUM_THREADS:-1}" =~ ^[1-9][0-9]*(,[1-9][0-9]*)*$ ]] || usage_error "the environment variable \
OMP_NUM_THREADS must be a positive whole number of threads per process, got '$OMP_NUM_THREADS'; set it so or unset it"
OMP_THREADS="${OMP_NUM_THREADS:-}"
OMP_THREADS="${OMP_THREADS%%,*}"  # the threads OMP_NUM_THREADS gives a process ('' when it is unset)
