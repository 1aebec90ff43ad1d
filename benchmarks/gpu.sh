#!/usr/bin/env bash
# benchmarks/run.py on one CUDA GPU: bf16 autocast with fp32 master weights, wall clock with CUDA
# synchronisation, transformer-base width (d=512, FFN 2048, 8 heads, 6-6), larger batches than on
# CPU. A few minutes on a current data-centre GPU.
#
# Usage: benchmarks/gpu.sh [--out-dir DIR] [-- extra benchmarks.run options]
#   --out-dir DIR   where benchmarks-gpu.md (table) and benchmarks-gpu.json (rows) go
#                   (default: work-dirs/benchmarks-gpu)
# Needs a CUDA build of torch in the active environment: requirements.txt pins the CPU build, so on a
# GPU machine install the CUDA wheel of the same torch version first.
set -euo pipefail
REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT_DIR="$REPO_ROOT/work-dirs/benchmarks-gpu"
EXTRA=()

while [[ $# -gt 0 ]]; do
  case "$1" in
    --out-dir) [[ $# -ge 2 && -n "$2" ]] || { echo "error: --out-dir needs a value" >&2; exit 1; }
      OUT_DIR="$2"; shift 2 ;;
    --) shift; EXTRA=("$@"); break ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d'; exit 0 ;;
    *) echo "error: unknown option $1 (see --help)" >&2; exit 1 ;;
  esac
done

python - <<'EOF' || exit 1
import sys
import torch
if not torch.cuda.is_available():
    sys.exit(f"error: torch {torch.__version__} sees no CUDA device (CUDA build: "
             f"{torch.version.cuda or 'no, CPU-only wheel'}); run this on a GPU machine with a CUDA "
             "build of torch, or run `python -m benchmarks.run` for the CPU benchmark")
EOF

mkdir -p "$OUT_DIR"
cd "$REPO_ROOT"
python -m benchmarks.run --device cuda --dtype bfloat16 --clock wall --threads 4 \
  --embed-dim 512 --layers 6 --batch-tokens 8192 --gen-sentences 64 --step-sentences 64 \
  --sections training rk-overhead generation decoder-step compile \
  --rounds 5 --warmup 2 --json "$OUT_DIR/benchmarks-gpu.json.tmp" "${EXTRA[@]}" \
  > "$OUT_DIR/benchmarks-gpu.md.tmp" \
  || { rm -f "$OUT_DIR"/benchmarks-gpu.*.tmp; echo "error: the GPU benchmark failed (messages above)" >&2; exit 1; }
mv "$OUT_DIR/benchmarks-gpu.json.tmp" "$OUT_DIR/benchmarks-gpu.json"
mv "$OUT_DIR/benchmarks-gpu.md.tmp" "$OUT_DIR/benchmarks-gpu.md"
cat "$OUT_DIR/benchmarks-gpu.md"
