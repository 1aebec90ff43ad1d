#!/usr/bin/env bash
# Create (or update) the project's virtual environment: bash scripts/setup.sh [VENV_DIR]
# Needs only python3.11 and pip; re-running is a no-op when the requirement files are unchanged.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${1:-${ODE_SEQ_VENV:-$ROOT/.venv}}"
PYTHON="${PYTHON:-python3.11}"
command -v "$PYTHON" >/dev/null 2>&1 || PYTHON=python3
"$PYTHON" - <<'PY' || { echo "ode-seq needs Python 3.11 (found $("$PYTHON" --version 2>&1)); set PYTHON=/path/to/python3.11" >&2; exit 1; }
import sys; sys.exit(0 if sys.version_info[:2] == (3, 11) else 1)
PY
STAMP="$VENV/.ode-seq-requirements"
WANT="$(cat "$ROOT/requirements.txt" "$ROOT/requirements-fairseq.txt" | sha256sum | cut -d' ' -f1)"
if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$WANT" ] && [ -x "$VENV/bin/python" ]; then
  exit 0
fi
[ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
PIP=("$VENV/bin/python" -m pip --disable-pip-version-check -q)
echo "ode-seq: installing requirements into $VENV" >&2
"${PIP[@]}" install -r "$ROOT/requirements.txt"
"${PIP[@]}" install --no-deps -r "$ROOT/requirements-fairseq.txt"
"$VENV/bin/python" -c "import fairseq, torch; assert torch.__version__.startswith('2.13.0'), torch.__version__"
echo "$WANT" > "$STAMP"
