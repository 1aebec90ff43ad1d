#!/usr/bin/env bash
# GEC data preparation: M2 and parallel corpora → tokenised text → 30K subword-nmt BPE learned on
# the target side and applied to both sides → fairseq-preprocess --joined-dictionary.
# Each stage is skipped when its output exists; outputs are written to a temporary name and
# renamed when complete.
#
# Usage: prepare.sh [options]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
HERE="$REPO_ROOT/examples/gec"
parse_options "$@" <<'EOF'
--work-dir=DIR        WORK_DIR           -          $REPO_ROOT/work-dirs/gec  # inputs in WORK_DIR/raw, text in WORK_DIR/text, binarised data in
                                                    # WORK_DIR/data-bin
--raw-dir=DIR         RAW_DIR                       # input folder (default: WORK_DIR/raw)
--train-m2=FILE       TRAIN_M2[]                    # a training M2 file, e.g. NUCLE, FCE train, W&I+LOCNESS train (repeatable)
--train-parallel=P    TRAIN_PARALLEL[]              # a raw parallel corpus P.src/P.tgt, e.g. Lang-8 (repeatable)
                                                    # Without either: every RAW_DIR/train-m2/*.m2 and RAW_DIR/train-parallel/*.src.
--parallel-tokenize=nltk|none  PARALLEL_TOKENIZE  nltk|none  nltk  # NLTK word tokenisation as in CoNLL, or none for
                                                    # tokenised text
--valid-m2=FILE       VALID_M2                      # (default: RAW_DIR/conll2013.m2)
--test-m2=FILE        TEST_M2                       # (default: RAW_DIR/conll2014.m2)
--annotator=ID        ANNOTATOR          whole      0      # whose corrections make the M2 targets
--min-len=N           MIN_LEN            whole      1      # training-pair filter: at least N tokens a side
--max-len=N           MAX_LEN            whole      0      # training-pair filter: at most N tokens a side (0 = none)
--max-ratio=R         MAX_RATIO          number     0      # training-pair filter: length ratio at most R (0 = off)
--drop-copies         DROP_COPIES                   # drop training pairs whose target equals the source
--bpe-merges=N        BPE_MERGES         positive   30000  # subword-nmt merges
--workers=N           WORKERS            positive   2
--data-bin=DIR        DATA_BIN                      # (default: WORK_DIR/data-bin)
EOF
RAW_DIR="${RAW_DIR:-$WORK_DIR/raw}"
VALID_M2="${VALID_M2:-$RAW_DIR/conll2013.m2}"
TEST_M2="${TEST_M2:-$RAW_DIR/conll2014.m2}"
DATA_BIN="${DATA_BIN:-$WORK_DIR/data-bin}"
TEXT="$WORK_DIR/text"
if [[ ${#TRAIN_M2[@]} -eq 0 && ${#TRAIN_PARALLEL[@]} -eq 0 ]]; then
  shopt -s nullglob
  TRAIN_M2=("$RAW_DIR"/train-m2/*.m2)
  for src in "$RAW_DIR"/train-parallel/*.src; do TRAIN_PARALLEL+=("${src%.src}"); done
  shopt -u nullglob
fi
[[ ${#TRAIN_M2[@]} -gt 0 || ${#TRAIN_PARALLEL[@]} -gt 0 ]] || die "no training data: put M2 files \
in $RAW_DIR/train-m2/ or parallel P.src/P.tgt in $RAW_DIR/train-parallel/, or pass --train-m2 / --train-parallel"
for m2 in "${TRAIN_M2[@]}" "$VALID_M2" "$TEST_M2"; do
  [[ -f "$m2" ]] || die "M2 file $m2 not found: pass existing files with --train-m2, --valid-m2 and --test-m2"
done
for prefix in "${TRAIN_PARALLEL[@]}"; do
  [[ -f "$prefix.src" && -f "$prefix.tgt" ]] \
    || die "parallel corpus $prefix.src/$prefix.tgt not found: fix --train-parallel"
done
use_project_python
require_command subword-nmt "pip install subword-nmt"
lock_dir "$WORK_DIR"
mkdir -p "$TEXT/corpus" "$TEXT/bpe"

# Stage 1: every corpus → tokenised parallel text (the converters write complete files or none).
parts=()
for m2 in "${TRAIN_M2[@]}"; do
  out="$TEXT/corpus/m2-$(basename "$m2" .m2)"
  if run_stage "$out.tgt" "conversion of $m2"; then
    python "$HERE/m2_to_parallel.py" "$m2" --out-prefix "$out" --annotator "$ANNOTATOR"
  fi
  parts+=("$out")
done
for prefix in "${TRAIN_PARALLEL[@]}"; do
  out="$TEXT/corpus/parallel-$(basename "$prefix")"
  if run_stage "$out.tgt" "tokenisation of $prefix"; then
    python "$HERE/parallel_text.py" --src "$prefix.src" --tgt "$prefix.tgt" --out-prefix "$out" \
      --tokenize "$PARALLEL_TOKENIZE" --min-len 0 --workers "$WORKERS"
  fi
  parts+=("$out")
done
for split in valid test; do
  m2="$VALID_M2"; [[ "$split" == test ]] && m2="$TEST_M2"
  if run_stage "$TEXT/$split.tgt" "conversion of $m2"; then
    python "$HERE/m2_to_parallel.py" "$m2" --out-prefix "$TEXT/$split" --annotator "$ANNOTATOR"
  fi
done

# Stage 2: all training pairs, filtered.
if run_stage "$TEXT/train.tgt" "training pair filter"; then
  for side in src tgt; do
    for part in "${parts[@]}"; do cat "$part.$side"; done > "$TEXT/all.$side.tmp"
    publish "$TEXT/all.$side.tmp" "$TEXT/all.$side"
  done
  python "$HERE/parallel_text.py" --src "$TEXT/all.src" --tgt "$TEXT/all.tgt" --out-prefix "$TEXT/train" \
    --tokenize none --min-len "$MIN_LEN" --max-len "$MAX_LEN" --max-ratio "$MAX_RATIO" \
    $([[ "$DROP_COPIES" == 1 ]] && echo --drop-copies)
  rm "$TEXT/all.src" "$TEXT/all.tgt"
fi

# Stage 3: BPE learned on the training targets, applied to both sides of every split.
if run_stage "$TEXT/bpe/codes" "learning $BPE_MERGES BPE merges"; then
  subword-nmt learn-bpe -s "$BPE_MERGES" < "$TEXT/train.tgt" > "$TEXT/bpe/codes.tmp"
  publish "$TEXT/bpe/codes.tmp" "$TEXT/bpe/codes"
fi
for split in train valid test; do
  for side in src tgt; do
    out="$TEXT/bpe/$split.$side"
    if run_stage "$out" "BPE segmentation"; then
      subword-nmt apply-bpe -c "$TEXT/bpe/codes" < "$TEXT/$split.$side" > "$out.tmp"
      publish "$out.tmp" "$out"
    fi
  done
done

# Stage 4: binarise with one dictionary shared by source and target.
if run_stage "$DATA_BIN" "binarisation"; then
  rm -rf "$DATA_BIN.tmp"
  fairseq-preprocess --source-lang src --target-lang tgt --joined-dictionary \
    --trainpref "$TEXT/bpe/train" --validpref "$TEXT/bpe/valid" --testpref "$TEXT/bpe/test" \
    --destdir "$DATA_BIN.tmp" --workers "$WORKERS" 2> "$WORK_DIR/preprocess.log" \
    || { rm -rf "$DATA_BIN.tmp"; die "fairseq-preprocess failed; see $WORK_DIR/preprocess.log"; }
  publish "$DATA_BIN.tmp" "$DATA_BIN"
fi
log "done: $DATA_BIN ($(wc -l < "$TEXT/train.src") training pairs)"
