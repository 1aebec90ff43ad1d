# Shared helpers for the translation recipes; sourced, not executed.
# Conventions: every stage writes to "$target.tmp" (file or directory) and renames it when
# complete, so an existing target is always complete and its stage is skipped on reruns.

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
export PYTHONPATH="$REPO_ROOT${PYTHONPATH:+:$PYTHONPATH}"

die() {
  echo "error: $*" >&2
  exit 1
}

log() {
  echo "[$(date +%H:%M:%S)] $*" >&2
}

require_file() {  # require_file PATH HINT
  [[ -s "$1" ]] || die "$1 is missing or empty; $2"
}

require_command() {  # require_command NAME HINT
  command -v "$1" >/dev/null 2>&1 || die "command '$1' not found; $2"
}

require_option_value() {  # require_option_value OPTION "$@" — the value after OPTION must exist
  [[ $# -ge 2 && -n "$2" ]] || die "option $1 needs a value"
}

stage_done() {  # stage_done TARGET NAME — true (and logs) when TARGET already exists
  if [[ -e "$1" ]]; then
    log "skip $2: $1 exists"
    return 0
  fi
  log "run $2 → $1"
  return 1
}

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
