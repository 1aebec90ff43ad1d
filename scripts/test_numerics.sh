#!/usr/bin/env bash
# The numerics tests (pytest -m numerics: tests/numerics.py's tolerances) under each CPU setting
# whose kernels round differently: torch's kernels for each instruction set (ATEN_CPU_CAPABILITY
# default, avx2, avx512 where the CPU has it), MKL's matrix kernels held to AVX2, and torch on 1
# and 2 threads. Prints per setting the pytest summary and the largest difference as a share of
# its tolerance; exits non-zero if any setting fails.
#
#   bash scripts/test_numerics.sh [SETTING ...] [-- PYTEST_ARGS ...]
#
# SETTING: default-kernels avx2 avx512 mkl-avx2 threads-1 threads-2 (default: all of them); the
# instruction-set settings run on 1 thread. PYTEST_ARGS default to the files holding marked tests.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

declare -A SETTINGS=(
  [default-kernels]="ATEN_CPU_CAPABILITY=default"
  [avx2]="ATEN_CPU_CAPABILITY=avx2"
  [avx512]="ATEN_CPU_CAPABILITY=avx512"
  [mkl-avx2]="MKL_ENABLE_INSTRUCTIONS=AVX2"
  [threads-1]="ODE_SEQ_TEST_THREADS=1"
  [threads-2]="ODE_SEQ_TEST_THREADS=2"
)
ORDER=(default-kernels avx2 avx512 mkl-avx2 threads-1 threads-2)

chosen=()
while [[ $# -gt 0 && "$1" != "--" ]]; do
  [[ -n "${SETTINGS[$1]:-}" ]] || { echo "test_numerics.sh: unknown setting '$1'; choose from: ${ORDER[*]}" >&2; exit 2; }
  chosen+=("$1")
  shift
done
[[ $# -gt 0 ]] && shift  # the --
[[ ${#chosen[@]} -gt 0 ]] || chosen=("${ORDER[@]}")
bash "$ROOT/scripts/setup.sh"
cd "$ROOT"
PYTHON="${ODE_SEQ_VENV:-$ROOT/.venv}/bin/python"

# ATEN_CPU_CAPABILITY is obeyed without a check (AVX-512 kernels on a CPU without them stop with
# SIGILL), so each instruction set runs only where /proc/cpuinfo lists what torch's own detection needs.
declare -A NEEDS=([avx2]="avx2 fma" [avx512]="avx512f avx512bw avx512vl avx512dq fma")
cpu_has() {
  local flags flag
  flags=" $(grep -m 1 '^flags' /proc/cpuinfo 2>/dev/null | cut -d: -f2) "
  for flag in "$@"; do [[ "$flags" == *" $flag "* ]] || return 1; done
}
capability() { env "$@" "$PYTHON" -c "import torch; print(torch.backends.cpu.get_cpu_capability())"; }

# Only the files that hold marked tests: collecting the whole suite costs a minute per setting.
[[ $# -gt 0 ]] || mapfile -t PATHS < <(grep -rl --include='test_*.py' 'pytest.mark.numerics' tests | sort)
[[ $# -gt 0 ]] && PATHS=("$@")

LOGS="$(mktemp -d)"
trap 'rm -rf "$LOGS"' EXIT
failed=0
for name in "${chosen[@]}"; do
  read -r -a setting <<<"${SETTINGS[$name]}"
  environment=(OMP_NUM_THREADS=1 ODE_SEQ_TEST_THREADS=1 "${setting[@]}")
  if [[ "${setting[0]}" == ODE_SEQ_TEST_THREADS=* ]]; then
    environment=(OMP_NUM_THREADS="${setting[0]#*=}" "${setting[@]}")
  fi
  if [[ -n "${NEEDS[$name]:-}" ]] && ! cpu_has ${NEEDS[$name]}; then
    echo "[numerics] $name: skipped: /proc/cpuinfo does not list all of ${NEEDS[$name]}"
    continue
  fi
  isa="$(capability "${environment[@]}")"
  log="$LOGS/$name.tsv"
  : >"$log"
  status=0
  summary="$(env "${environment[@]}" ODE_SEQ_NUMERICS_LOG="$log" "$PYTHON" -m pytest -q -m numerics -p no:cacheprovider \
    "${PATHS[@]}" 2>&1 | tail -n 1)" || status=$?
  worst="$(sort -t $'\t' -k2 -g "$log" | tail -n 1 | awk -F '\t' '{print $2 " (" $1 ")"}')"
  echo "[numerics] $name (${environment[*]}; torch $isa): $summary; largest share of tolerance ${worst:-none}"
  [[ $status -eq 0 ]] || failed=1
done
exit "$failed"
