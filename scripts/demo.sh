#!/usr/bin/env bash
# Set up if needed, then train a small RK2 ODE Transformer (learned coefficients) on the bundled English->Spanish Bible
# corpus on CPU, translate the test set and score it: bash scripts/demo.sh [--compare] [...]
set -euo pipefail
unset CDPATH  # with CDPATH set, `cd DIR` may go elsewhere and print where it went
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$ROOT/scripts/supervise.sh"  # a stop (SIGTERM, SIGINT, SIGHUP) ends every process it started
bash "$ROOT/scripts/setup.sh"
export PATH="${ODE_SEQ_VENV:-$ROOT/.venv}/bin:$PATH"
exec bash "$ROOT/examples/translation/run_bible_demo.sh" "$@"
