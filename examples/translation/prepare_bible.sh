#!/usr/bin/env bash
# Prepare the bundled English–Spanish Bible corpus (examples/translation/data) for fairseq: take the
# first N verse pairs of each split, then prepare_parallel.sh (Moses normalisation and tokenisation
# with aggressive dash splits → one joint SentencePiece unigram model → training-pair length filter
# → fairseq-preprocess --joined-dictionary). Each stage is skipped when its output exists; a work
# dir remembers its settings and refuses others.
#
# Usage: prepare_bible.sh [options]
# Result: DIR/data-bin (fairseq), DIR/spm.model, DIR/raw/test.TGT (detokenised references),
#         DIR/corpus/SPLIT.ref (verse references, line-aligned with the text).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
parse_options "$@" <<'EOF'
--work-dir=DIR        WORK_DIR     -         $REPO_ROOT/work-dirs/bible-en-es  # outputs (default: work-dirs/bible-en-es under the repo root)
--corpus-dir=DIR      CORPUS_DIR   -         $REPO_ROOT/examples/translation/data  # the {train,valid,test}.tsv.gz corpus
--src=LANG            SRC          en|es     en        # source language
--tgt=LANG            TGT          en|es     es        # target language
--vocab-size=N        VOCAB_SIZE   positive  8000      # joint SentencePiece vocabulary, a soft limit
--train-pairs=N       TRAIN_PAIRS  whole     0         # use only the first N training pairs (0 = all)
--valid-pairs=N       VALID_PAIRS  whole     0         # likewise for validation
--test-pairs=N        TEST_PAIRS   whole     0         # likewise for test
--workers=N           WORKERS      positive  $(nproc)  # processes for tokenisation and binarisation (default: nproc)
EOF
[[ "$SRC" != "$TGT" ]] || usage_error "--src/--tgt must be en and es (in either order), got $SRC → $TGT"
declare -A COLUMN=([en]=2 [es]=3)
use_project_python
declare -A PAIRS=([train]=$TRAIN_PAIRS [valid]=$VALID_PAIRS [test]=$TEST_PAIRS)
for split in train valid test; do
  require_file "$CORPUS_DIR/$split.tsv.gz" \
    "rebuild it with examples/translation/build_bible_corpus.py or pass --corpus-dir"
done
lock_dir "$WORK_DIR"

# The settings are recorded before the stage publishes anything, so that a run stopped in between
# and rerun with other settings is refused instead of mixing corpora.
CORPUS_ID="$(content_id "$CORPUS_DIR"/{train,valid,test}.tsv.gz)"
check_run_config "$WORK_DIR/corpus" "corpus=$CORPUS_ID train=$TRAIN_PAIRS valid=$VALID_PAIRS test=$TEST_PAIRS"

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

"$REPO_ROOT/examples/translation/prepare_parallel.sh" --src "$SRC" --tgt "$TGT" \
  --train "$WORK_DIR/corpus/train" --valid "$WORK_DIR/corpus/valid" --test "$WORK_DIR/corpus/test" \
  --work-dir "$WORK_DIR" --subword sentencepiece --vocab-size "$VOCAB_SIZE" --workers "$WORKERS"
