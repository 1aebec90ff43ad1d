#!/usr/bin/env bash
# Prepare CNN/DailyMail for fairseq: extract + clean → subwords (sources cut to 500) → binarise.
# Each stage is skipped when its output exists; outputs are built under a temporary name and renamed.
#
# Usage: prepare.sh [options]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
HERE="$REPO_ROOT/examples/summarization"
# shellcheck source=recipe.sh
source "$HERE/recipe.sh"
parse_options "$@" <<'EOF'
--work-dir=DIR        WORK_DIR      -                   $REPO_ROOT/work-dirs/cnndm  # outputs WORK_DIR/{raw,spm,subword,bin}
--input-format=F      INPUT_FORMAT  stories|table       stories  # stories (.story files + URL lists) | table (CSV/JSONL)
--cnn-stories=DIR     CNN_STORIES                       # unpacked cnn/stories (default: WORK_DIR/input/cnn/stories)
--dm-stories=DIR      DM_STORIES                        # unpacked dailymail/stories (default: WORK_DIR/input/dailymail/stories)
--url-lists=DIR       URL_LISTS                         # all_train.txt all_val.txt all_test.txt (default: WORK_DIR/input/url_lists)
--table-dir=DIR       TABLE_DIR                         # {train,validation,test}.{csv,jsonl} (default: WORK_DIR/input/cnn_dailymail)
--on-missing=error|skip  ON_MISSING  error|skip         error    # what a story missing for a listed URL does
--keep-bylines        KEEP_BYLINES                      # keep CNN datelines and Daily Mail headers
--subword=sentencepiece|gpt2  SUBWORD  sentencepiece|gpt2  sentencepiece
--vocab-size=N        VOCAB_SIZE    positive            32000    # sentencepiece vocabulary
--sample-lines=N      SAMPLE_LINES  positive            300000   # lines sampled to train sentencepiece
--workers=N           WORKERS       positive            $(nproc) # parallel encoder / binariser processes (default: nproc)
EOF
BYLINES=()
[[ "$KEEP_BYLINES" == 0 ]] || BYLINES=(--keep-bylines)
CNN_STORIES="${CNN_STORIES:-$WORK_DIR/input/cnn/stories}"
DM_STORIES="${DM_STORIES:-$WORK_DIR/input/dailymail/stories}"
URL_LISTS="${URL_LISTS:-$WORK_DIR/input/url_lists}"
TABLE_DIR="${TABLE_DIR:-$WORK_DIR/input/cnn_dailymail}"
use_project_python
lock_dir "$WORK_DIR"

# 1. Extract and clean: raw/{train,valid,test}.{source,target,ids} (cnndm_extract.py writes
#    raw.partial and renames it).
if run_stage "$WORK_DIR/raw" "extraction"; then
  if [[ "$INPUT_FORMAT" == stories ]]; then
    python "$HERE/cnndm_extract.py" stories --stories "$CNN_STORIES" "$DM_STORIES" \
      --url-lists "$URL_LISTS" --on-missing "$ON_MISSING" --out-dir "$WORK_DIR/raw" "${BYLINES[@]}"
  else
    python "$HERE/cnndm_extract.py" table --input-dir "$TABLE_DIR" --out-dir "$WORK_DIR/raw" "${BYLINES[@]}"
  fi
fi

# 2. Sentencepiece model on the training articles and summaries.
if [[ "$SUBWORD" == sentencepiece ]] && run_stage "$WORK_DIR/spm" "sentencepiece training"; then
  rm -rf "$WORK_DIR/spm.tmp" && mkdir -p "$WORK_DIR/spm.tmp"
  python "$HERE/subword.py" train-spm --inputs "$WORK_DIR/raw/train.source" "$WORK_DIR/raw/train.target" \
    --model-prefix "$WORK_DIR/spm.tmp/spm" --vocab-size "$VOCAB_SIZE" --sample-lines "$SAMPLE_LINES"
  publish "$WORK_DIR/spm.tmp" "$WORK_DIR/spm"
fi

# 3. Subword encoding (sources keep their first CNNDM_SOURCE_SUBWORDS subwords) and the dictionary.
ENCODER=(--kind "$SUBWORD")
[[ "$SUBWORD" == sentencepiece ]] && ENCODER+=(--model "$WORK_DIR/spm/spm.model")
if run_stage "$WORK_DIR/subword" "subword encoding"; then
  partial="$WORK_DIR/subword.tmp"
  mkdir -p "$partial"
  for split in train valid test; do
    for side in source target; do
      [[ -f "$partial/$split.$side" ]] && continue
      limit=0
      [[ "$side" == source ]] && limit="$CNNDM_SOURCE_SUBWORDS"
      python "$HERE/subword.py" encode "${ENCODER[@]}" --max-tokens "$limit" --workers "$WORKERS" \
        --input "$WORK_DIR/raw/$split.$side" --output "$partial/$split.$side"
    done
  done
  python "$HERE/subword.py" dictionary "${ENCODER[@]}" --inputs "$partial/train.source" "$partial/train.target" \
    --output "$partial/dict.txt"
  echo "$SUBWORD" > "$partial/kind.txt"
  publish "$partial" "$WORK_DIR/subword"
fi
built_with="$(cat "$WORK_DIR/subword/kind.txt")"
[[ "$built_with" == "$SUBWORD" ]] \
  || die "$WORK_DIR/subword was built with $built_with, not --subword $SUBWORD; use another --work-dir"

# 4. Binarise with one dictionary (the whole subword vocabulary) shared by sources and targets;
#    keep the subword model beside it.
if run_stage "$WORK_DIR/bin" "binarisation"; then
  partial="$WORK_DIR/bin.tmp"
  rm -rf "$partial"
  python -m fairseq_cli.preprocess --source-lang source --target-lang target \
    --trainpref "$WORK_DIR/subword/train" --validpref "$WORK_DIR/subword/valid" \
    --testpref "$WORK_DIR/subword/test" --destdir "$partial" --joined-dictionary \
    --srcdict "$WORK_DIR/subword/dict.txt" --workers "$WORKERS" 2> "$WORK_DIR/preprocess.log" \
    || { rm -rf "$partial"; die "fairseq-preprocess failed; see $WORK_DIR/preprocess.log"; }
  if [[ "$SUBWORD" == sentencepiece ]]; then
    cp "$WORK_DIR/spm/spm.model" "$partial/spm.model"
  else
    gpt2_dir="$(python "$HERE/subword.py" gpt2-files)"
    cp "$gpt2_dir/encoder.json" "$gpt2_dir/vocab.bpe" "$partial/"
  fi
  publish "$partial" "$WORK_DIR/bin"
fi
log "done: $WORK_DIR/bin (reports: $WORK_DIR/raw/extract_report.json)"
