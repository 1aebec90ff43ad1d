# A clean stop for a long-running bash script; sourced (by examples/lib.sh, benchmarks/gpu.sh and
# scripts/demo.sh), not executed, before the script starts any work.
#
# Sourcing it from a script run as `bash SCRIPT ARGS` (or ./SCRIPT) makes that process the
# script's supervisor: it runs the same command again as its child and waits for it. Every process
# the script starts then carries the supervisor's mark in its environment (ODE_SEQ_SUPERVISOR, set
# here and read by nothing else), however deep it is, whichever session it is in and whether or
# not its parent is still there. A SIGTERM, SIGINT or SIGHUP that reaches the supervisor (`kill
# PID`, Ctrl-C, `timeout`, a closed terminal) stops all of them: they are frozen with SIGSTOP until
# none is left that could start another, then sent SIGTERM (and SIGCONT); those still there after
# SUPERVISE_GRACE_SECONDS get SIGKILL. The supervisor returns when none is left, and then ends by the
# signal it got (exit status 128 + its number). A script started by a supervised one is not
# supervised again. bash alone cannot do this: it runs a trap only after the foreground child it
# waits for has ended, and a child whose parent died is no longer found below it.

SUPERVISE_GRACE_SECONDS=10

start_time() {  # start_time PID — print when the process started (field 22 of /proc/PID/stat)
  local line fields IFS=$' \t\n'
  { read -r line < "/proc/$1/stat"; } 2>/dev/null || return 1
  fields=(${line##*) })  # the fields after the command name: numbers, and the state (a letter)
  echo "${fields[19]}"
}

supervisor_running() {  # supervisor_running MARK — true when the supervisor of MARK (PID/START) runs
  [[ "$1" == */* ]] && [[ "$(start_time "${1%/*}")" == "${1#*/}" ]]
}

marked() {  # marked — set MARKED to the PIDs of the living processes that carry this supervisor's mark
  local file
  MARKED=()
  # grep runs without the mark, so that it does not find itself.
  for file in $(ODE_SEQ_SUPERVISOR="" grep -lzxF "ODE_SEQ_SUPERVISOR=$ODE_SEQ_SUPERVISOR" /proc/[0-9]*/environ \
    2>/dev/null); do
    file="${file#/proc/}"
    MARKED+=("${file%/environ}")
  done
}

stop_marked() {  # stop_marked SIGNAL — the supervisor's trap: end every process that carries its mark
  trap '' TERM INT HUP
  local -A frozen=()
  local -a fresh MARKED
  local pid waited=0
  while true; do  # freeze until a scan finds nobody new: a stopped process starts no other
    marked
    fresh=()
    for pid in "${MARKED[@]}"; do
      [[ -n "${frozen[$pid]:-}" ]] || fresh+=("$pid")
    done
    [[ ${#fresh[@]} -gt 0 ]] || break
    kill -STOP "${fresh[@]}" 2>/dev/null
    for pid in "${fresh[@]}"; do frozen[$pid]=1; done
  done
  if [[ ${#frozen[@]} -gt 0 ]]; then
    kill -TERM "${!frozen[@]}" 2>/dev/null
    kill -CONT "${!frozen[@]}" 2>/dev/null
  fi
  while marked && [[ ${#MARKED[@]} -gt 0 && $waited -lt $((20 * SUPERVISE_GRACE_SECONDS)) ]]; do
    [[ $waited -lt $((10 * SUPERVISE_GRACE_SECONDS)) ]] || kill -KILL "${MARKED[@]}" 2>/dev/null
    ODE_SEQ_SUPERVISOR="" sleep 0.1
    waited=$((waited + 1))
  done
  wait
  echo "$(basename "$0"): stopped by SIG$1; no process it started is left" >&2
  trap - "$1"
  kill -s "$1" $$
  exit $((128 + $(kill -l "$1")))
}

if [[ -f "$0" && "${BASH_SOURCE[-1]}" == "$0" ]] && ! supervisor_running "${ODE_SEQ_SUPERVISOR:-}"; then
  set +e
  ODE_SEQ_SUPERVISOR="$$/$(start_time $$)"
  export ODE_SEQ_SUPERVISOR
  trap 'stop_marked TERM' TERM
  trap 'stop_marked INT' INT
  trap 'stop_marked HUP' HUP
  bash "$0" "$@" <&0 &
  wait $!
  exit $?
fi
