#!/usr/bin/env bash
# Prepare CNN/DailyMail for fairseq: extract + clean -> subword (sources cut to 500) -> binarise.
#
# Parameters (environment variables, defaults in brackets):
#   INPUT_FORMAT  stories | table                                    [stories]
#   CNN_STORIES   unpacked cnn/stories directory                     [raw/cnn/stories]
#   DM_STORIES    unpacked dailymail/stories directory               [raw/dailymail/stories]
#   URL_LISTS     directory with all_train.txt all_val.txt all_test.txt  [raw/url_lists]
#   TABLE_DIR     directory with {train,validation,test}.{csv,jsonl} [raw/cnn_dailymail]
#   ON_MISSING    error | skip: what a story missing for a listed URL does  [error]
#   KEEP_BYLINES  1 keeps CNN datelines and Daily Mail headers       [0]
#   DATA_DIR      output: raw/ subword/ bin/ (and spm/)              [data/cnndm]
#   SUBWORD       sentencepiece | gpt2                               [sentencepiece]
#   SPM_VOCAB     sentencepiece vocabulary size                      [32000]
#   SPM_SAMPLE_LINES  lines sampled to train sentencepiece           [300000]
#   WORKERS       parallel encoder / binariser processes             [nproc]
#   PYTHON        interpreter with fairseq and sentencepiece         [python]
# Each stage is skipped when its output exists; outputs are built under *.partial and renamed.
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=recipe.sh
source "$SCRIPT_DIR/recipe.sh"

INPUT_FORMAT="${INPUT_FORMAT:-stories}"
CNN_STORIES="${CNN_STORIES:-raw/cnn/stories}"
DM_STORIES="${DM_STORIES:-raw/dailymail/stories}"
URL_LISTS="${URL_LISTS:-raw/url_lists}"
TABLE_DIR="${TABLE_DIR:-raw/cnn_dailymail}"
ON_MISSING="${ON_MISSING:-error}"
KEEP_BYLINES="${KEEP_BYLINES:-0}"
DATA_DIR="${DATA_DIR:-data/cnndm}"
SUBWORD="${SUBWORD:-sentencepiece}"
SPM_VOCAB="${SPM_VOCAB:-32000}"
SPM_SAMPLE_LINES="${SPM_SAMPLE_LINES:-300000}"
WORKERS="${WORKERS:-$(nproc)}"
PYTHON="${PYTHON:-python}"

fail() { echo "prepare.sh: error: $*" >&2; exit 2; }

case "$SUBWORD" in sentencepiece | gpt2) ;; *) fail "SUBWORD=$SUBWORD; use sentencepiece or gpt2" ;; esac
mkdir -p "$DATA_DIR"

# 1. Extract and clean: raw/{train,valid,test}.{source,target,ids}
if [[ ! -d "$DATA_DIR/raw" ]]; then
  bylines=()
  [[ "$KEEP_BYLINES" == 1 ]] && bylines=(--keep-bylines)
  case "$INPUT_FORMAT" in
    stories)
      "$PYTHON" "$SCRIPT_DIR/cnndm_extract.py" stories --stories "$CNN_STORIES" "$DM_STORIES" \
        --url-lists "$URL_LISTS" --on-missing "$ON_MISSING" --out-dir "$DATA_DIR/raw" "${bylines[@]}" ;;
    table)
      "$PYTHON" "$SCRIPT_DIR/cnndm_extract.py" table --input-dir "$TABLE_DIR" --out-dir "$DATA_DIR/raw" "${bylines[@]}" ;;
    *) fail "INPUT_FORMAT=$INPUT_FORMAT; use stories (.story files + URL lists) or table (CSV/JSONL)" ;;
  esac
fi

# 2. Sentencepiece model on the training articles and summaries
if [[ "$SUBWORD" == sentencepiece && ! -f "$DATA_DIR/spm/spm.model" ]]; then
  rm -rf "$DATA_DIR/spm.partial" && mkdir -p "$DATA_DIR/spm.partial"
  "$PYTHON" "$SCRIPT_DIR/subword.py" train-spm --inputs "$DATA_DIR/raw/train.source" "$DATA_DIR/raw/train.target" \
    --model-prefix "$DATA_DIR/spm.partial/spm" --vocab-size "$SPM_VOCAB" --sample-lines "$SPM_SAMPLE_LINES"
  rm -rf "$DATA_DIR/spm" && mv "$DATA_DIR/spm.partial" "$DATA_DIR/spm"
fi

# 3. Subword encoding (sources keep their first CNNDM_SOURCE_SUBWORDS subwords) and the dictionary
if [[ -d "$DATA_DIR/subword" ]]; then
  built_with="$(cat "$DATA_DIR/subword/kind.txt")"
  [[ "$built_with" == "$SUBWORD" ]] || fail "$DATA_DIR/subword was built with $built_with, not SUBWORD=$SUBWORD; use another DATA_DIR"
else
  partial="$DATA_DIR/subword.partial"
  mkdir -p "$partial"
  encoder=(--kind "$SUBWORD")
  [[ "$SUBWORD" == sentencepiece ]] && encoder+=(--model "$DATA_DIR/spm/spm.model")
  for split in train valid test; do
    for side in source target; do
      [[ -f "$partial/$split.$side" ]] && continue
      limit=0
      [[ "$side" == source ]] && limit="$CNNDM_SOURCE_SUBWORDS"
      "$PYTHON" "$SCRIPT_DIR/subword.py" encode "${encoder[@]}" --max-tokens "$limit" --workers "$WORKERS" \
        --input "$DATA_DIR/raw/$split.$side" --output "$partial/$split.$side"
    done
  done
  "$PYTHON" "$SCRIPT_DIR/subword.py" dictionary "${encoder[@]}" --inputs "$partial/train.source" "$partial/train.target" \
    --output "$partial/dict.txt"
  echo "$SUBWORD" > "$partial/kind.txt"
  mv "$partial" "$DATA_DIR/subword"
fi

# 4. Binarise with one dictionary (the whole subword vocabulary) shared by sources and targets;
#    keep the subword model beside it
if [[ ! -d "$DATA_DIR/bin" ]]; then
  partial="$DATA_DIR/bin.partial"
  rm -rf "$partial"
  "$PYTHON" -m fairseq_cli.preprocess --source-lang source --target-lang target \
    --trainpref "$DATA_DIR/subword/train" --validpref "$DATA_DIR/subword/valid" --testpref "$DATA_DIR/subword/test" \
    --destdir "$partial" --joined-dictionary --srcdict "$DATA_DIR/subword/dict.txt" --workers "$WORKERS"
  if [[ "$SUBWORD" == sentencepiece ]]; then
    cp "$DATA_DIR/spm/spm.model" "$partial/spm.model"
  else
    gpt2_dir="$("$PYTHON" "$SCRIPT_DIR/subword.py" gpt2-files)"
    cp "$gpt2_dir/encoder.json" "$gpt2_dir/vocab.bpe" "$partial/"
  fi
  mv "$partial" "$DATA_DIR/bin"
fi
echo "prepare.sh: done: $DATA_DIR/bin (reports: $DATA_DIR/raw/extract_report.json)"
