#!/usr/bin/env bash
# Turn raw parallel text into a fairseq data-bin, the common back end of the prepare scripts:
#   check (UTF-8, aligned line counts, no empty valid/test lines)
#   → Moses punctuation normalisation + tokenisation with aggressive dash splits (sacremoses)
#   → joint subwords: BPE (subword-nmt, --vocab-size merges) or SentencePiece unigram
#   → clean the training pairs (1..--max-len subwords, length ratio ≤ --ratio)
#   → fairseq-preprocess --joined-dictionary.
# Every stage is skipped when its output exists; a work dir refuses to be reused with other settings.
#
# Usage: prepare_parallel.sh --train PREFIX --valid PREFIX --test PREFIX --src L --tgt L
#                            --work-dir DIR [options]
# Result: DIR/data-bin, DIR/raw/test.TGT (references for scoring), DIR/bpe.codes or DIR/spm.model.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
HERE="$REPO_ROOT/examples/translation"
parse_options "$@" <<'EOF'
--train=PREFIX        TRAIN       -                      required  # raw, detokenised files PREFIX.L for both languages
--valid=PREFIX        VALID       -                      required  # likewise
--test=PREFIX         TEST        -                      required  # likewise
--src=L               SRC         -                      required  # source language
--tgt=L               TGT         -                      required  # target language
--work-dir=DIR        WORK_DIR    -                      required  # outputs
--subword=KIND        SUBWORD     bpe|sentencepiece      bpe       # bpe or sentencepiece
--vocab-size=N        VOCAB_SIZE  positive               32000     # BPE merges or SentencePiece vocabulary
--bpe-codes=FILE      BPE_CODES                                    # apply these BPE codes instead of learning them (subword bpe only)
--max-len=N           MAX_LEN     positive               250       # training pair filter: at most N subwords a side
--ratio=R             RATIO       number                 1.5       # training pair filter: length ratio at most R
--workers=N           WORKERS     positive               $(nproc)  # processes or threads per stage; Moses tokenisation: files of 10,000+ lines only (default: nproc)
EOF
[[ -z "$BPE_CODES" || "$SUBWORD" == bpe ]] || usage_error "--bpe-codes needs --subword bpe"
[[ -z "$BPE_CODES" || -s "$BPE_CODES" ]] || die "BPE codes file $BPE_CODES is missing or empty"
# Absolute paths, so that the recorded settings do not depend on the directory the script ran from.
TRAIN="$(realpath -m -- "$TRAIN")" VALID="$(realpath -m -- "$VALID")" TEST="$(realpath -m -- "$TEST")"
WORK_DIR="$(realpath -m -- "$WORK_DIR")"
[[ -z "$BPE_CODES" ]] || BPE_CODES="$(realpath -m -- "$BPE_CODES")"
use_project_python
require_command sacremoses "pip install sacremoses"
[[ "$SUBWORD" == sentencepiece ]] || require_command subword-nmt "pip install subword-nmt"
lock_dir "$WORK_DIR"

declare -A PREFIX=([train]="$TRAIN" [valid]="$VALID" [test]="$TEST")

# 1. Validate and copy the raw text (training pairs may hold empty lines: cleaning drops them).
if run_stage "$WORK_DIR/raw" "input check"; then
  rm -rf "$WORK_DIR/raw.tmp" && mkdir -p "$WORK_DIR/raw.tmp"
  for split in train valid test; do
    allow_empty=()
    [[ "$split" == train ]] && allow_empty=(--allow-empty)
    python "$HERE/parallel_text.py" check "${PREFIX[$split]}" "$SRC" "$TGT" "${allow_empty[@]}" >&2 \
      || { rm -rf "$WORK_DIR/raw.tmp"; die "bad $split input (message above)"; }
    for lang in "$SRC" "$TGT"; do
      cp "${PREFIX[$split]}.$lang" "$WORK_DIR/raw.tmp/$split.$lang"
    done
  done
  publish "$WORK_DIR/raw.tmp" "$WORK_DIR/raw"
fi
input_id() {  # input_id SPLIT — the content of the split's input pair (its copy in raw/ once the
  local prefix="${PREFIX[$1]}"  # inputs are gone: the copy is byte for byte what they were)
  if [[ -f "$prefix.$SRC" && -f "$prefix.$TGT" ]]; then
    content_id "$prefix.$SRC" "$prefix.$TGT"
  else
    content_id "$WORK_DIR/raw/$1.$SRC" "$WORK_DIR/raw/$1.$TGT"
  fi
}
# One assignment per line: set -e stops at each failed one.
TRAIN_ID="$(input_id train)"
VALID_ID="$(input_id valid)"
TEST_ID="$(input_id test)"
CODES_ID=""
[[ -z "$BPE_CODES" ]] || CODES_ID="$(content_id "$BPE_CODES")"
check_run_config "$WORK_DIR" "train=$TRAIN_ID valid=$VALID_ID test=$TEST_ID src=$SRC tgt=$TGT \
subword=$SUBWORD vocab=$VOCAB_SIZE codes=$CODES_ID max_len=$MAX_LEN ratio=$RATIO"

# 2. Moses normalisation (control characters removed) and tokenisation with aggressive dash splits.
if run_stage "$WORK_DIR/tok" "tokenisation"; then
  rm -rf "$WORK_DIR/tok.tmp" && mkdir -p "$WORK_DIR/tok.tmp"
  for split in train valid test; do
    for lang in "$SRC" "$TGT"; do
      # sacremoses' worker processes take a second or more to start: one process below 10,000 lines
      lines="$(wc -l < "$WORK_DIR/raw/$split.$lang")"
      sacremoses -q -l "$lang" -j "$(( lines < 10000 ? 1 : WORKERS ))" normalize -c tokenize -a \
        < "$WORK_DIR/raw/$split.$lang" > "$WORK_DIR/tok.tmp/$split.$lang"
    done
  done
  publish "$WORK_DIR/tok.tmp" "$WORK_DIR/tok"
fi

# 3. Joint subwords learned on both training sides (or given codes), applied to every split.
if [[ "$SUBWORD" == bpe ]]; then
  if [[ -n "$BPE_CODES" ]]; then
    CODES="$BPE_CODES"
  else
    CODES="$WORK_DIR/bpe.codes"
    if run_stage "$CODES" "BPE learning ($VOCAB_SIZE merges)"; then
      subword-nmt learn-joint-bpe-and-vocab --input "$WORK_DIR/tok/train.$SRC" "$WORK_DIR/tok/train.$TGT" \
        --symbols "$VOCAB_SIZE" --output "$CODES.tmp" \
        --write-vocabulary "$WORK_DIR/bpe.vocab.$SRC" "$WORK_DIR/bpe.vocab.$TGT"
      publish "$CODES.tmp" "$CODES"
    fi
  fi
  encode() { subword-nmt apply-bpe --codes "$CODES" --num-workers "$WORKERS"; }
else
  if run_stage "$WORK_DIR/spm.model" "SentencePiece training ($VOCAB_SIZE pieces)"; then
    python "$HERE/sentencepiece_tool.py" train --model-prefix "$WORK_DIR/spm" \
      --vocab-size "$VOCAB_SIZE" --threads "$WORKERS" "$WORK_DIR/tok/train.$SRC" "$WORK_DIR/tok/train.$TGT"
  fi
  encode() { python "$HERE/sentencepiece_tool.py" encode --model "$WORK_DIR/spm.model"; }
fi
if run_stage "$WORK_DIR/subwords" "subword segmentation"; then
  [[ "$SUBWORD" == sentencepiece ]] || require_file "$CODES" "the BPE codes file is needed to segment"
  rm -rf "$WORK_DIR/subwords.tmp" && mkdir -p "$WORK_DIR/subwords.tmp"
  for split in train valid test; do
    for lang in "$SRC" "$TGT"; do
      encode < "$WORK_DIR/tok/$split.$lang" > "$WORK_DIR/subwords.tmp/$split.$lang"
    done
  done
  publish "$WORK_DIR/subwords.tmp" "$WORK_DIR/subwords"
fi

# 4. Length filter on the training pairs only (valid and test stay complete).
if run_stage "$WORK_DIR/clean" "training pair filter"; then
  rm -rf "$WORK_DIR/clean.tmp" && mkdir -p "$WORK_DIR/clean.tmp"
  python "$HERE/parallel_text.py" clean "$WORK_DIR/subwords/train" "$WORK_DIR/clean.tmp/train" \
    "$SRC" "$TGT" --max-len "$MAX_LEN" --ratio "$RATIO" >&2
  for split in valid test; do
    for lang in "$SRC" "$TGT"; do
      cp "$WORK_DIR/subwords/$split.$lang" "$WORK_DIR/clean.tmp/$split.$lang"
    done
  done
  publish "$WORK_DIR/clean.tmp" "$WORK_DIR/clean"
fi

# 5. Binarise with one dictionary for both languages (so embeddings can be shared).
if run_stage "$WORK_DIR/data-bin" "binarisation"; then
  rm -rf "$WORK_DIR/data-bin.tmp"
  fairseq-preprocess --source-lang "$SRC" --target-lang "$TGT" \
    --trainpref "$WORK_DIR/clean/train" --validpref "$WORK_DIR/clean/valid" \
    --testpref "$WORK_DIR/clean/test" --destdir "$WORK_DIR/data-bin.tmp" \
    --joined-dictionary --workers "$WORKERS" 2> "$WORK_DIR/preprocess.log" \
    || { rm -rf "$WORK_DIR/data-bin.tmp"; die "fairseq-preprocess failed; see $WORK_DIR/preprocess.log"; }
  publish "$WORK_DIR/data-bin.tmp" "$WORK_DIR/data-bin"
fi
log "data-bin ready: $WORK_DIR/data-bin ($(wc -l < "$WORK_DIR/clean/train.$SRC") training pairs)"
