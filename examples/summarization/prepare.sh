#!/usr/bin/env bash
# Prepare CNN/DailyMail for fairseq: extract + clean → subwords (sources cut to 500) → binarise.
# Each stage is skipped when its output exists; outputs are built under a temporary name and renamed.
#
# Usage: prepare.sh [options]
#   --work-dir DIR        outputs WORK_DIR/{raw,spm,subword,bin} (default: work-dirs/cnndm)
#   --input-format F      stories (.story files + URL lists) | table (CSV/JSONL) (default: stories)
#   --cnn-stories DIR     unpacked cnn/stories (default: WORK_DIR/input/cnn/stories)
#   --dm-stories DIR      unpacked dailymail/stories (default: WORK_DIR/input/dailymail/stories)
#   --url-lists DIR       all_train.txt all_val.txt all_test.txt (default: WORK_DIR/input/url_lists)
#   --table-dir DIR       {train,validation,test}.{csv,jsonl} (default: WORK_DIR/input/cnn_dailymail)
#   --on-missing error|skip   what a story missing for a listed URL does (default: error)
#   --keep-bylines        keep CNN datelines and Daily Mail headers
#   --subword sentencepiece|gpt2   (default: sentencepiece)
#   --vocab-size N        sentencepiece vocabulary (default: 32000)
#   --sample-lines N      lines sampled to train sentencepiece (default: 300000)
#   --workers N           parallel encoder / binariser processes (default: nproc)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
refuse_environment INPUT_FORMAT=--input-format CNN_STORIES=--cnn-stories DM_STORIES=--dm-stories \
  URL_LISTS=--url-lists TABLE_DIR=--table-dir ON_MISSING=--on-missing KEEP_BYLINES=--keep-bylines \
  DATA_DIR=--work-dir SUBWORD=--subword SPM_VOCAB=--vocab-size SPM_SAMPLE_LINES=--sample-lines \
  WORKERS=--workers PYTHON=ODE_SEQ_VENV
HERE="$REPO_ROOT/examples/summarization"
# shellcheck source=recipe.sh
source "$HERE/recipe.sh"

WORK_DIR="$REPO_ROOT/work-dirs/cnndm"
INPUT_FORMAT=stories
CNN_STORIES=""
DM_STORIES=""
URL_LISTS=""
TABLE_DIR=""
ON_MISSING=error
BYLINES=()
SUBWORD=sentencepiece
VOCAB_SIZE=32000
SAMPLE_LINES=300000
WORKERS="$(nproc)"

while [[ $# -gt 0 ]]; do
  case "$1" in
    --work-dir) require_option_value "$@"; WORK_DIR="$2"; shift 2 ;;
    --input-format) require_option_value "$@"; INPUT_FORMAT="$2"; shift 2 ;;
    --cnn-stories) require_option_value "$@"; CNN_STORIES="$2"; shift 2 ;;
    --dm-stories) require_option_value "$@"; DM_STORIES="$2"; shift 2 ;;
    --url-lists) require_option_value "$@"; URL_LISTS="$2"; shift 2 ;;
    --table-dir) require_option_value "$@"; TABLE_DIR="$2"; shift 2 ;;
    --on-missing) require_option_value "$@"; ON_MISSING="$2"; shift 2 ;;
    --keep-bylines) BYLINES=(--keep-bylines); shift ;;
    --subword) require_option_value "$@"; SUBWORD="$2"; shift 2 ;;
    --vocab-size) require_option_value "$@"; VOCAB_SIZE="$2"; shift 2 ;;
    --sample-lines) require_option_value "$@"; SAMPLE_LINES="$2"; shift 2 ;;
    --workers) require_option_value "$@"; WORKERS="$2"; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) unknown_option "$1" ;;
  esac
done
[[ "$INPUT_FORMAT" == stories || "$INPUT_FORMAT" == table ]] \
  || usage_error "--input-format must be stories (.story files + URL lists) or table (CSV/JSONL), \
got $INPUT_FORMAT"
[[ "$ON_MISSING" == error || "$ON_MISSING" == skip ]] || usage_error "--on-missing must be error or skip"
[[ "$SUBWORD" == sentencepiece || "$SUBWORD" == gpt2 ]] \
  || usage_error "--subword must be sentencepiece or gpt2, got $SUBWORD"
require_positive --vocab-size "$VOCAB_SIZE"
require_positive --sample-lines "$SAMPLE_LINES"
require_positive --workers "$WORKERS"
CNN_STORIES="${CNN_STORIES:-$WORK_DIR/input/cnn/stories}"
DM_STORIES="${DM_STORIES:-$WORK_DIR/input/dailymail/stories}"
URL_LISTS="${URL_LISTS:-$WORK_DIR/input/url_lists}"
TABLE_DIR="${TABLE_DIR:-$WORK_DIR/input/cnn_dailymail}"
use_project_python
mkdir -p "$WORK_DIR"

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
