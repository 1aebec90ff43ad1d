#!/usr/bin/env bash
# Set up if needed, then run the whole test suite: bash scripts/test.sh [pytest args]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$ROOT/scripts/setup.sh"
cd "$ROOT"
exec "${ODE_SEQ_VENV:-$ROOT/.venv}/bin/python" -m pytest -q "$@" tests
