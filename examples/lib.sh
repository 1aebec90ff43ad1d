# The shell library of every pipeline under examples/; sourced, not executed.
# The contract: flags only (old environment-variable interfaces are refused), `-h`/`--help` prints
# the script's header comment, a usage error prints `SCRIPT: error: …` and exits 2, a failure of
# the work exits 1. Every stage writes to "$target.tmp" (file or directory) and renames it when
# complete, so an existing target is always complete and its stage is skipped on reruns.

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

usage() {  # print the script's header comment (the lines after the shebang), without the '# '
  awk 'NR > 1 { if (!/^#/) exit; sub(/^# ?/, ""); print }' "$0"
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

default_gpus() {  # print 1 when torch sees a CUDA device, else 0 (after use_project_python)
  python -c 'import torch; print(int(torch.cuda.is_available()))' 2>/dev/null \
    || die "python could not import torch to look for a GPU; pass --gpus N"
}

require_gpus() {  # require_gpus VALUE [decoding] — --gpus is a whole number (0 or 1 for decoding)
  require_whole --gpus "$1"
  [[ -z "${2:-}" || "$1" -le 1 ]] || usage_error "--gpus must be 0 or 1: decoding runs on one device, got $1"
}

train_device_options() {  # train_device_options GPUS [fp16] — fairseq-train options: 0 = the CPU,
  if [[ "$1" -eq 0 ]]; then  # N = N GPUs (in mixed precision when asked)
    echo --cpu
  else
    echo --distributed-world-size "$1" ${2:+--fp16}
  fi
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
# partial output (a .tmp) is never used, and how much room there was to write.
STAGE_TARGET=""  # the output of the stage running now, and its name (set by run_stage)
STAGE_NAME=""

stage_failed() {  # stage_failed STATUS — from die and the ERR trap: report the stage that did not finish
  [[ -n "$STAGE_TARGET" && ! -e "$STAGE_TARGET" && "$BASH_SUBSHELL" -eq 0 ]] || return 0
  local dir="$STAGE_TARGET" free room=""
  while [[ ! -d "$dir" && "$dir" == */* ]]; do dir="${dir%/*}"; done
  free="$(df -Pk -- "${dir:-.}" 2>/dev/null | awk 'NR == 2 { print $4 }')" || free=""
  [[ -z "$free" ]] || room=" The file system of $dir has $((free / 1024)) MiB free."
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

data_bin_id() {  # data_bin_id DIR SUBSET — the content_id of a fairseq data-bin's dictionaries and SUBSET
  compgen -G "$1/$2.*" > /dev/null \
    || die "$1 holds no binarised subset '$2' (no $2.* files); binarise it with the prepare script"
  content_id "$1"/dict.*.txt "$1/$2".*
}

path_from() {  # path_from DIR PATH — PATH relative to DIR (true as long as both move together)
  realpath -m --relative-to="$1" -- "$2"
}

# The translation scripts once read the architecture from ODE_SEQ_ARCH; no script reads it now.
refuse_environment ODE_SEQ_ARCH=--arch
