#!/usr/bin/env bash
# The GPU run, from a bare machine with Python, a CUDA build of torch and no network (the device
# machine of docs/benchmarks.md "GPU run"), in one call: install the wheels that
# benchmarks/gpu_prepare.sh put in .whl/ (fairseq and the pure-Python packages it needs), then,
# under one time budget (benchmarks/gpu_run.py): correctness checks on CUDA, the speed and memory
# table in bf16 at d=512, a short translation study and a short language-model study on the
# prepared Bible corpora (.gpu-data/).
# Everything goes to the output folder; summary.md there is also printed at the end.
#
# Usage: benchmarks/gpu.sh [options]
#   --out-dir DIR     results (default: $OUT where that is set, else work-dirs/gpu-run)
#   --seconds N       the whole run's budget, installing included (default: 510; with --cpu-smoke 1200)
#   --cpu-smoke       every part on the CPU with tiny sizes (the test suite's check): its work takes
#                     3 minutes on a 2-core machine, 8 under a load average of 12 (docs/benchmarks.md)
#   --data-bin DIR    the translation corpus (default: .gpu-data/bible/data-bin, made by gpu_prepare.sh)
#   --lm-data-bin DIR the language-model corpus (default: .gpu-data/bible-lm/data-bin, likewise)
#   --parts "A B"     of checks speed study lm (default: all four)
# PYTHON names the interpreter (default: python3, the image's, which has torch).
set -euo pipefail
unset CDPATH  # with CDPATH set, `cd DIR` may go elsewhere and print where it went
REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$REPO_ROOT/scripts/supervise.sh"  # a stop (SIGTERM, SIGINT, SIGHUP) ends every process it started
PYTHON="${PYTHON:-python3}"
OUT_DIR="${OUT:-$REPO_ROOT/work-dirs/gpu-run}"
SECONDS_BUDGET=""
SMOKE=0
DATA_BIN="$REPO_ROOT/.gpu-data/bible/data-bin"
LM_DATA_BIN="$REPO_ROOT/.gpu-data/bible-lm/data-bin"
PARTS="checks speed study lm"
WHEELS="$REPO_ROOT/.whl"
SITE=/tmp/ode-seq-site

die() { echo "error: $*" >&2; exit 1; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    --out-dir) [[ $# -ge 2 && -n "$2" ]] || die "--out-dir needs a value"; OUT_DIR="$2"; shift 2 ;;
    --seconds) [[ "${2:-}" =~ ^[1-9][0-9]*$ ]] || die "--seconds needs a whole number of seconds"
      SECONDS_BUDGET="$2"; shift 2 ;;
    --cpu-smoke) SMOKE=1; shift ;;
    --data-bin) [[ $# -ge 2 && -n "$2" ]] || die "--data-bin needs a value"; DATA_BIN="$2"; shift 2 ;;
    --lm-data-bin) [[ $# -ge 2 && -n "$2" ]] || die "--lm-data-bin needs a value"; LM_DATA_BIN="$2"; shift 2 ;;
    --parts) [[ $# -ge 2 && -n "$2" ]] || die "--parts needs a value"; PARTS="$2"; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d'; exit 0 ;;
    *) die "unknown option $1 (see --help)" ;;
  esac
done
SECONDS_BUDGET="${SECONDS_BUDGET:-$([[ "$SMOKE" == 1 ]] && echo 1200 || echo 510)}"
START=$(date +%s)

# Nothing is written before these checks pass.
command -v "$PYTHON" >/dev/null 2>&1 || die "no $PYTHON; set PYTHON to an interpreter that has torch"
if [[ "$SMOKE" == 0 ]]; then
  "$PYTHON" - <<'EOF' || exit 1
import sys
import torch
if not torch.cuda.is_available():
    sys.exit(f"error: torch {torch.__version__} sees no CUDA device (CUDA build: "
             f"{torch.version.cuda or 'no, CPU-only wheel'}); run this on a GPU machine, or add "
             "--cpu-smoke to run every part on the CPU with tiny sizes")
EOF
fi
for part in $PARTS; do
  [[ " checks speed study lm " == *" $part "* ]] || die "--parts: unknown part '$part'; choose from checks speed study lm"
done
if [[ " $PARTS " == *" checks "* || " $PARTS " == *" study "* ]]; then
  compgen -G "$DATA_BIN/dict.*.txt" >/dev/null || die "no prepared translation corpus in $DATA_BIN; run \
benchmarks/gpu_prepare.sh first (or give --data-bin)"
fi
if [[ " $PARTS " == *" lm "* ]]; then
  [[ -f "$LM_DATA_BIN/dict.txt" ]] || die "no prepared language-model corpus in $LM_DATA_BIN; run \
benchmarks/gpu_prepare.sh first (or give --lm-data-bin)"
fi

# fairseq and its missing dependencies from the carried wheels, unless this Python has them.
if "$PYTHON" -c "import fairseq, hydra, omegaconf, bitarray, sacremoses" 2>/dev/null; then
  INSTALL="nothing installed: fairseq and its dependencies were importable"
else
  compgen -G "$WHEELS/*.whl" >/dev/null || die "fairseq is not importable and $WHEELS holds no wheels; \
run benchmarks/gpu_prepare.sh here and carry .whl"
  BEFORE=$(date +%s)
  "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target "$SITE" "$WHEELS"/*.whl || die "installing the wheels of $WHEELS failed (messages above)"
  export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}"
  INSTALL="$(ls "$WHEELS"/*.whl | wc -l) wheels installed in $(( $(date +%s) - BEFORE )) s"
fi
echo "[gpu.sh] $INSTALL" >&2

mkdir -p "$OUT_DIR"
cd "$REPO_ROOT"
LEFT=$(( SECONDS_BUDGET - ($(date +%s) - START) - 15 ))  # 15 s for the summary and leaving
(( LEFT > 30 )) || die "--seconds $SECONDS_BUDGET leaves no time for the parts after installing"
ARGS=(--out-dir "$OUT_DIR" --data-bin "$DATA_BIN" --lm-data-bin "$LM_DATA_BIN" --seconds "$LEFT" --install "$INSTALL" --parts $PARTS)
[[ "$SMOKE" == 1 ]] && ARGS+=(--smoke)
"$PYTHON" -m benchmarks.gpu_run "${ARGS[@]}"
