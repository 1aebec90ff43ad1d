#!/usr/bin/env bash
# Prepare the bundled English–Spanish Bible corpus (examples/translation/data) for fairseq: take the
# first N verse pairs of each split, then prepare_parallel.sh (Moses normalisation and tokenisation
# with aggressive dash splits → one joint SentencePiece unigram model → training-pair length filter
# → fairseq-preprocess --joined-dictionary). Each stage is skipped when its output exists; a work
# dir remembers its settings and refuses others.
#
# Usage: prepare_bible.sh [options]
#   --work-dir DIR      outputs (default: work-dirs/bible-en-es under the repo root)
#   --corpus-dir DIR    the {train,valid,test}.tsv.gz corpus (default: examples/translation/data)
#   --src LANG --tgt LANG   en or es (default: en → es)
#   --vocab-size N      joint SentencePiece vocabulary, a soft limit (default: 8000)
#   --train-pairs N --valid-pairs N --test-pairs N   use only the first N pairs (0 = all; default 0)
#   --workers N         processes for tokenisation and binarisation (default: nproc)
# Result: DIR/data-bin (fairseq), DIR/spm.model, DIR/raw/test.TGT (detokenised references),
#         DIR/corpus/SPLIT.ref (verse references, line-aligned with the text).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"

WORK_DIR="$REPO_ROOT/work-dirs/bible-en-es"
CORPUS_DIR="$REPO_ROOT/examples/translation/data"
SRC=en
TGT=es
VOCAB_SIZE=8000
TRAIN_PAIRS=0
VALID_PAIRS=0
TEST_PAIRS=0
WORKERS="$(nproc)"

while [[ $# -gt 0 ]]; do
  case "$1" in
    --work-dir) require_option_value "$@"; WORK_DIR="$2"; shift 2 ;;
    --corpus-dir) require_option_value "$@"; CORPUS_DIR="$2"; shift 2 ;;
    --src) require_option_value "$@"; SRC="$2"; shift 2 ;;
    --tgt) require_option_value "$@"; TGT="$2"; shift 2 ;;
    --vocab-size) require_option_value "$@"; VOCAB_SIZE="$2"; shift 2 ;;
    --train-pairs) require_option_value "$@"; TRAIN_PAIRS="$2"; shift 2 ;;
    --valid-pairs) require_option_value "$@"; VALID_PAIRS="$2"; shift 2 ;;
    --test-pairs) require_option_value "$@"; TEST_PAIRS="$2"; shift 2 ;;
    --workers) require_option_value "$@"; WORKERS="$2"; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) unknown_option "$1" ;;
  esac
done

declare -A COLUMN=([en]=2 [es]=3)
[[ -n "${COLUMN[$SRC]:-}" && -n "${COLUMN[$TGT]:-}" && "$SRC" != "$TGT" ]] \
  || usage_error "--src/--tgt must be en and es (in either order), got $SRC → $TGT"
require_positive --vocab-size "$VOCAB_SIZE"
require_positive --workers "$WORKERS"
require_whole --train-pairs "$TRAIN_PAIRS"
require_whole --valid-pairs "$VALID_PAIRS"
require_whole --test-pairs "$TEST_PAIRS"
use_project_python
declare -A PAIRS=([train]=$TRAIN_PAIRS [valid]=$VALID_PAIRS [test]=$TEST_PAIRS)
for split in train valid test; do
  require_file "$CORPUS_DIR/$split.tsv.gz" \
    "rebuild it with examples/translation/build_bible_corpus.py or pass --corpus-dir"
done

# The first N pairs of each split as one raw text file per language, plus verse references.
if run_stage "$WORK_DIR/corpus/test.ref" "corpus extraction"; then
  mkdir -p "$WORK_DIR/corpus"
  for split in train valid test; do
    tsv="$WORK_DIR/corpus/$split.tsv.tmp"
    gzip -dc "$CORPUS_DIR/$split.tsv.gz" \
      | awk -F'\t' -v n="${PAIRS[$split]}" 'NR > 1 && (n == 0 || NR <= n + 1)' > "$tsv"
    [[ -s "$tsv" ]] || die "$CORPUS_DIR/$split.tsv.gz holds no verse pairs"
    for lang in "$SRC" "$TGT"; do
      cut -f"${COLUMN[$lang]}" "$tsv" > "$WORK_DIR/corpus/$split.$lang.tmp"
      publish "$WORK_DIR/corpus/$split.$lang.tmp" "$WORK_DIR/corpus/$split.$lang"
    done
    cut -f1 "$tsv" > "$WORK_DIR/corpus/$split.ref.tmp"
    rm "$tsv"
    publish "$WORK_DIR/corpus/$split.ref.tmp" "$WORK_DIR/corpus/$split.ref"
  done
fi
CORPUS_ID="$(content_id "$CORPUS_DIR"/{train,valid,test}.tsv.gz)"
check_run_config "$WORK_DIR/corpus" "corpus=$CORPUS_ID train=$TRAIN_PAIRS valid=$VALID_PAIRS test=$TEST_PAIRS"

"$REPO_ROOT/examples/translation/prepare_parallel.sh" --src "$SRC" --tgt "$TGT" \
  --train "$WORK_DIR/corpus/train" --valid "$WORK_DIR/corpus/valid" --test "$WORK_DIR/corpus/test" \
  --work-dir "$WORK_DIR" --subword sentencepiece --vocab-size "$VOCAB_SIZE" --workers "$WORKERS"
