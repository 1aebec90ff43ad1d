#!/usr/bin/env bash
# Create (or update) the project's virtual environment: bash scripts/setup.sh [VENV_DIR]
# Needs CPython 3.11, 3.12 or 3.13 with pip and venv: PYTHON=/path/to/python, by default python3.11,
# else python3 (an existing VENV_DIR keeps its own). On 3.13 fairseq is compiled, which also needs a
# C++ compiler and Python's headers. Re-running is a no-op when the requirement files are unchanged.
set -euo pipefail
unset CDPATH  # with CDPATH set, `cd DIR` may go elsewhere and print where it went
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${1:-${ODE_SEQ_VENV:-$ROOT/.venv}}"
ALIAS="$ROOT/tools/en-core-web-sm"
if [ -x "$VENV/bin/python" ]; then
  PYTHON="$VENV/bin/python"
elif [ -z "${PYTHON:-}" ]; then
  PYTHON=python3.11
  command -v "$PYTHON" >/dev/null 2>&1 || PYTHON=python3
fi
VERSION="$("$PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null)" || VERSION="not found"
case "$VERSION" in
  3.11|3.12|3.13) ;;
  *)
    echo "ode-seq needs CPython 3.11, 3.12 or 3.13, but $PYTHON is $VERSION." >&2
    if [ "$PYTHON" = "$VENV/bin/python" ]; then
      echo "Remove $VENV or give another VENV_DIR, and set PYTHON=/path/to/python3.11 (or 3.12, 3.13)." >&2
    else
      echo "Set PYTHON=/path/to/python3.11 (or 3.12, 3.13)." >&2
    fi
    exit 1 ;;
esac
STAMP="$VENV/.ode-seq-requirements"
WANT="$(cat "$ROOT/requirements.txt" "$ROOT/requirements-fairseq.txt" "$ROOT/pyproject.toml" \
  "$ALIAS/pyproject.toml" "$ALIAS/en_core_web_sm/__init__.py" | sha256sum | cut -d' ' -f1)"
if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$WANT" ] && [ -x "$VENV/bin/python" ]; then
  exit 0
fi
[ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
PIP=("$VENV/bin/python" -m pip --disable-pip-version-check -q)
echo "ode-seq: installing requirements into $VENV (Python $VERSION)" >&2
"${PIP[@]}" install -r "$ROOT/requirements.txt"
echo "ode-seq: installing fairseq (where no wheel exists, i.e. on Python 3.13, it compiles for minutes)" >&2
"${PIP[@]}" install --no-deps --no-build-isolation -r "$ROOT/requirements-fairseq.txt" "$ALIAS"
echo "ode-seq: installing ode-seq itself, editable (the checkout is what runs), with its command ode-seq" >&2
"${PIP[@]}" install --no-deps --no-build-isolation -e "$ROOT"
"$VENV/bin/python" - <<'PY'
import spacy, torch
# fairseq's compiled extensions that its data loading and fairseq-generate use
import fairseq.data.data_utils_fast, fairseq.data.token_block_utils_fast, fairseq.libbleu  # noqa: F401
assert torch.__version__.startswith("2.13.0"), torch.__version__
assert spacy.util.is_package("en_core_web_sm"), "en_core_web_sm alias not installed"
PY
"$VENV/bin/ode-seq" user-dir >/dev/null
echo "$WANT" > "$STAMP"
