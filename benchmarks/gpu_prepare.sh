#!/usr/bin/env bash
# Fill, on this machine, the two folders that benchmarks/gpu.sh needs on the bare GPU machine, and
# have git ignore them (they travel only as the device tool's carried paths):
#   .whl/        CPython 3.12 x86-64 wheels: ve-fairseq (fairseq 0.12 with its compiled extensions)
#                and what fairseq needs that the GPU machine's image lacks: hydra-core, omegaconf,
#                antlr4-python3-runtime (built here from its source: PyPI has no wheel of 4.9.3),
#                bitarray, sacremoses; the versions of requirements*.txt
#   .gpu-data/   the bundled Bible corpus prepared as for the quality study (prepare_bible.sh,
#                a joint vocabulary of 4000 SentencePiece units): bible/data-bin; and its English
#                column as for the language-model study (language_modeling/prepare.sh): bible-lm/data-bin
# Then it checks that the repository's tracked files and both folders stay under the 64 MiB that
# one device call carries. Run it in the checkout that the device tool sends, with the project's
# environment active (it needs pip and, for the corpus, fairseq-preprocess); again after a change
# of the pinned versions or of the corpus scripts. About a minute.
#
# Usage: benchmarks/gpu_prepare.sh
set -euo pipefail
unset CDPATH  # with CDPATH set, `cd DIR` may go elsewhere and print where it went
REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO_ROOT"
die() { echo "error: $*" >&2; exit 1; }
case "${1:-}" in
  -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d'; exit 0 ;;
  "") ;;
  *) die "no options are taken (see --help)" ;;
esac
command -v fairseq-preprocess >/dev/null 2>&1 || die "activate the project's environment first (fairseq-preprocess not found)"
LIMIT_MIB=64

pinned() {  # pinned NAME FILE — the version FILE pins for NAME (the first line naming it)
  sed -n "s/^$1==\([^ ;]*\).*/\1/p" "$2" | head -1 | grep . || die "$2 pins no version of $1"
}
PURE=(hydra-core omegaconf sacremoses)
BINARY=(bitarray)
SPECS=("ve-fairseq==$(pinned ve-fairseq requirements-fairseq.txt)")
for name in "${PURE[@]}" "${BINARY[@]}"; do SPECS+=("$name==$(pinned "$name" requirements.txt)"); done
ANTLR="antlr4-python3-runtime==$(pinned antlr4-python3-runtime requirements.txt)"

EXCLUDE="$(git rev-parse --path-format=absolute --git-common-dir)/info/exclude"
mkdir -p "$(dirname "$EXCLUDE")"
for path in /.whl/ /.gpu-data/; do
  grep -qxF "$path" "$EXCLUDE" 2>/dev/null || echo "$path" >> "$EXCLUDE"
done

echo "[gpu_prepare] wheels for CPython 3.12 x86-64 → .whl/" >&2
rm -rf .whl.tmp && mkdir .whl.tmp
python -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 --platform manylinux1_x86_64 -d .whl.tmp "${SPECS[@]}" \
  || die "pip could not download ${SPECS[*]}"
python -m pip wheel -q --no-deps -w .whl.tmp "$ANTLR" || die "pip could not build a wheel of $ANTLR"
rm -rf .whl && mv .whl.tmp .whl

echo "[gpu_prepare] the Bible corpus → .gpu-data/bible/data-bin" >&2
examples/translation/prepare_bible.sh --work-dir work-dirs/gpu-prepare/bible --vocab-size 4000
echo "[gpu_prepare] the Bible's English column → .gpu-data/bible-lm/data-bin" >&2
examples/language_modeling/prepare.sh --corpus bible --work-dir work-dirs/gpu-prepare/bible-lm
rm -rf .gpu-data && mkdir -p .gpu-data/bible .gpu-data/bible-lm
cp -r work-dirs/gpu-prepare/bible/data-bin .gpu-data/bible/data-bin
cp -r work-dirs/gpu-prepare/bible-lm/data-bin .gpu-data/bible-lm/data-bin

TRACKED=$(git ls-files -z | du -cb --files0-from=- 2>/dev/null | tail -1 | cut -f1)
CARRIED=$(du -cb .whl .gpu-data | tail -1 | cut -f1)
TOTAL_MIB=$(( (TRACKED + CARRIED) / 1048576 ))
ls -l .whl
echo "[gpu_prepare] tracked files $(( TRACKED / 1048576 )) MiB + .whl and .gpu-data $(( CARRIED / 1048576 )) MiB = $TOTAL_MIB MiB of the $LIMIT_MIB MiB a call carries" >&2
(( TOTAL_MIB < LIMIT_MIB )) || die "the repository and the carried folders exceed what one device call carries"
for path in .whl .gpu-data; do
  git check-ignore -q "$path" || die "git does not ignore $path; check $EXCLUDE"
done
