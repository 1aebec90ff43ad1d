#!/usr/bin/env bash
# Set up if needed, then run the test suite: bash scripts/test.sh [pytest args, default: tests]
set -euo pipefail
unset CDPATH  # with CDPATH set, `cd DIR` may go elsewhere and print where it went
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$ROOT/scripts/setup.sh"
cd "$ROOT"
[ $# -gt 0 ] || set -- tests
exec "${ODE_SEQ_VENV:-$ROOT/.venv}/bin/python" -m pytest -q "$@"
