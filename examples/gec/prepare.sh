#!/usr/bin/env bash
# GEC data preparation: M2 and parallel corpora -> tokenised text -> 30K subword-nmt BPE learned on
# the target side and applied to both sides -> fairseq-preprocess --joined-dictionary.
#
# Every setting is an environment variable with a default; each stage is skipped when its output
# exists, and outputs are written to a temporary name and renamed when complete.
#   RAW               input folder (default work-dirs/gec/raw)
#   TRAIN_M2          space-separated training M2 files, e.g. NUCLE, FCE train, W&I+LOCNESS train
#                     (default: every $RAW/train-m2/*.m2)
#   TRAIN_PARALLEL    space-separated prefixes P of raw parallel corpora P.src/P.tgt, e.g. Lang-8
#                     (default: every $RAW/train-parallel/*.src, minus the .src)
#   PARALLEL_TOKENIZE nltk (CoNLL NLTK word tokenisation) | none (already tokenised); default nltk
#   VALID_M2, TEST_M2 M2 files (default $RAW/conll2013.m2 and $RAW/conll2014.m2)
#   ANNOTATOR         whose corrections make the M2 targets (default 0)
#   MIN_LEN, MAX_LEN, MAX_RATIO, DROP_COPIES   training-pair filters (default 1, 0 = none, 0 = off, 0)
#   BPE_MERGES        subword-nmt merges (default 30000), WORKERS (default 2)
#   WORK              intermediate text (default work-dirs/gec/text)
#   DATA_BIN          fairseq binary data (default work-dirs/gec/data-bin)
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
PYTHON=${PYTHON:-python}
RAW=${RAW:-$ROOT/work-dirs/gec/raw}
TRAIN_M2=${TRAIN_M2-$(ls "$RAW"/train-m2/*.m2 2>/dev/null | tr '\n' ' ' || true)}
TRAIN_PARALLEL=${TRAIN_PARALLEL-$(ls "$RAW"/train-parallel/*.src 2>/dev/null | sed 's/\.src$//' | tr '\n' ' ' || true)}
PARALLEL_TOKENIZE=${PARALLEL_TOKENIZE:-nltk}
VALID_M2=${VALID_M2:-$RAW/conll2013.m2}
TEST_M2=${TEST_M2:-$RAW/conll2014.m2}
ANNOTATOR=${ANNOTATOR:-0}
MIN_LEN=${MIN_LEN:-1}
MAX_LEN=${MAX_LEN:-0}
MAX_RATIO=${MAX_RATIO:-0}
DROP_COPIES=${DROP_COPIES:-0}
BPE_MERGES=${BPE_MERGES:-30000}
WORKERS=${WORKERS:-2}
WORK=${WORK:-$ROOT/work-dirs/gec/text}
DATA_BIN=${DATA_BIN:-$ROOT/work-dirs/gec/data-bin}

fail() { echo "prepare.sh: error: $*" >&2; exit 1; }
log() { echo "prepare.sh: $*" >&2; }

[ -n "${TRAIN_M2// }${TRAIN_PARALLEL// }" ] ||
  fail "no training data: put M2 files in $RAW/train-m2/ or parallel P.src/P.tgt in $RAW/train-parallel/, or set TRAIN_M2 / TRAIN_PARALLEL"
for m2 in $TRAIN_M2 "$VALID_M2" "$TEST_M2"; do
  [ -f "$m2" ] || fail "M2 file $m2 not found: set TRAIN_M2, VALID_M2 and TEST_M2 to existing files"
done
for prefix in $TRAIN_PARALLEL; do
  [ -f "$prefix.src" ] && [ -f "$prefix.tgt" ] || fail "parallel corpus $prefix.src/$prefix.tgt not found: fix TRAIN_PARALLEL"
done
case "$PARALLEL_TOKENIZE" in nltk|none) ;; *) fail "PARALLEL_TOKENIZE must be nltk or none, got $PARALLEL_TOKENIZE" ;; esac
command -v subword-nmt >/dev/null || fail "subword-nmt not found: pip install subword-nmt"
command -v fairseq-preprocess >/dev/null || fail "fairseq-preprocess not found: install fairseq 0.12"

mkdir -p "$WORK/corpus" "$WORK/bpe"

# Stage 1: every corpus -> tokenised parallel text.
parts=()
for m2 in $TRAIN_M2; do
  out="$WORK/corpus/m2-$(basename "$m2" .m2)"
  if [ ! -f "$out.tgt" ]; then
    "$PYTHON" "$HERE/m2_to_parallel.py" "$m2" --out-prefix "$out" --annotator "$ANNOTATOR"
  fi
  parts+=("$out")
done
for prefix in $TRAIN_PARALLEL; do
  out="$WORK/corpus/parallel-$(basename "$prefix")"
  if [ ! -f "$out.tgt" ]; then
    "$PYTHON" "$HERE/parallel_text.py" --src "$prefix.src" --tgt "$prefix.tgt" --out-prefix "$out" \
      --tokenize "$PARALLEL_TOKENIZE" --min-len 0 --workers "$WORKERS"
  fi
  parts+=("$out")
done
for split in valid test; do
  m2=$VALID_M2; [ "$split" = test ] && m2=$TEST_M2
  [ -f "$WORK/$split.tgt" ] || "$PYTHON" "$HERE/m2_to_parallel.py" "$m2" --out-prefix "$WORK/$split" --annotator "$ANNOTATOR"
done

# Stage 2: all training pairs, filtered.
if [ ! -f "$WORK/train.tgt" ]; then
  for side in src tgt; do
    for part in "${parts[@]}"; do cat "$part.$side"; done > "$WORK/all.$side.partial"
    mv "$WORK/all.$side.partial" "$WORK/all.$side"
  done
  copies=(); [ "$DROP_COPIES" = 1 ] && copies=(--drop-copies)
  "$PYTHON" "$HERE/parallel_text.py" --src "$WORK/all.src" --tgt "$WORK/all.tgt" --out-prefix "$WORK/train" \
    --tokenize none --min-len "$MIN_LEN" --max-len "$MAX_LEN" --max-ratio "$MAX_RATIO" "${copies[@]}"
  rm "$WORK/all.src" "$WORK/all.tgt"
fi

# Stage 3: BPE learned on the training targets, applied to both sides of every split.
if [ ! -f "$WORK/bpe/codes" ]; then
  log "learning $BPE_MERGES BPE merges on $WORK/train.tgt"
  subword-nmt learn-bpe -s "$BPE_MERGES" < "$WORK/train.tgt" > "$WORK/bpe/codes.partial"
  mv "$WORK/bpe/codes.partial" "$WORK/bpe/codes"
fi
for split in train valid test; do
  for side in src tgt; do
    out="$WORK/bpe/$split.$side"
    if [ ! -f "$out" ]; then
      subword-nmt apply-bpe -c "$WORK/bpe/codes" < "$WORK/$split.$side" > "$out.partial"
      mv "$out.partial" "$out"
    fi
  done
done

# Stage 4: binarise with one dictionary shared by source and target.
if [ ! -d "$DATA_BIN" ]; then
  rm -rf "$DATA_BIN.partial"
  fairseq-preprocess --source-lang src --target-lang tgt --joined-dictionary \
    --trainpref "$WORK/bpe/train" --validpref "$WORK/bpe/valid" --testpref "$WORK/bpe/test" \
    --destdir "$DATA_BIN.partial" --workers "$WORKERS"
  mv "$DATA_BIN.partial" "$DATA_BIN"
else
  log "$DATA_BIN exists: skipping binarisation"
fi
log "done: $DATA_BIN ($(wc -l < "$WORK/train.src") training pairs)"
