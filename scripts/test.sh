#!/usr/bin/env bash
# Set up if needed, then run the test suite: bash scripts/test.sh [pytest args, default: tests benchmarks/tests]
# The tests run in ODE_SEQ_TEST_WORKERS processes (pytest-xdist, each test file in one process;
# default: the CPUs this process may use, at most 4); ODE_SEQ_TEST_WORKERS=0 runs them in this one.
# Files are handed out in collection order, which starts with the end-to-end pipelines (the longest
# files), rather than xdist's default of the files with most tests first, which left them to last.
# The 25 slowest tests and fixtures are listed at the end (what CI time is spent on).
set -euo pipefail
unset CDPATH  # with CDPATH set, `cd DIR` may go elsewhere and print where it went
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$ROOT/scripts/setup.sh"
cd "$ROOT"
[ $# -gt 0 ] || set -- tests benchmarks/tests
CPUS="$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)"  # nproc alone would answer OMP_NUM_THREADS
WORKERS="${ODE_SEQ_TEST_WORKERS:-$(( CPUS < 4 ? CPUS : 4 ))}"
if ! [[ "$WORKERS" =~ ^[0-9]+$ ]]; then
  echo "ODE_SEQ_TEST_WORKERS=$WORKERS: give a number of worker processes (0: none, run in this process)" >&2
  exit 2
fi
exec "${ODE_SEQ_VENV:-$ROOT/.venv}/bin/python" -m pytest -q -n "$WORKERS" --dist loadfile --no-loadscope-reorder --durations 25 "$@"
