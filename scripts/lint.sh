#!/usr/bin/env bash
# The house rules (pyproject.toml [tool.ruff]): lint and formatting, in seconds. bash scripts/lint.sh
set -euo pipefail
unset CDPATH  # with CDPATH set, `cd DIR` may go elsewhere and print where it went
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$ROOT/scripts/setup.sh"
cd "$ROOT"
RUFF="${ODE_SEQ_VENV:-$ROOT/.venv}/bin/ruff"
"$RUFF" check .
"$RUFF" format --check .
