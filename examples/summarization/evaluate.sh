#!/usr/bin/env bash
# Summarise a CNN/DailyMail subset with the paper's decoding settings (recipe.sh), detokenise,
# score ROUGE. Each stage is skipped when its output exists; outputs are written under a temporary
# name and renamed. OUT_DIR/run-config.txt refuses a rerun with other settings or another
# checkpoint (use another --out-dir or delete it).
#
# Usage: evaluate.sh [options] [-- extra fairseq-generate options]
#   --work-dir DIR        prepare.sh's work dir (default: work-dirs/cnndm)
#   --method M            residual | rk2-learned | rk4: picks the default checkpoint (default: rk4)
#   --checkpoint FILE     (default: WORK_DIR/checkpoints/METHOD/checkpoint_best.pt)
#   --subset test|valid   (default: test)
#   --ref FILE            reference summaries, one per line (default: WORK_DIR/raw/SUBSET.target)
#   --out-dir DIR         generate-SUBSET.txt, SUBSET.hyp, rouge.{txt,json}
#                         (default: the checkpoint's directory/eval-SUBSET)
#   --gpus N              0 = decode on the CPU, 1 = on a GPU (default: 1 if CUDA is visible, else 0)
#   --batch-size N        sentences per decoding batch (default: 32)
#   --beam N --lenpen X --min-len N --max-len-b N --no-repeat-ngram N
#                         decoding (default: 4, 2.0, 55, 140, 3: recipe.sh)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
refuse_environment DATA_DIR=--work-dir CHECKPOINT=--checkpoint SUBSET=--subset REF=--ref \
  OUT_DIR=--out-dir GPUS=--gpus BATCH_SIZE=--batch-size BEAM=--beam LENPEN=--lenpen MIN_LEN=--min-len \
  MAX_LEN_B=--max-len-b NO_REPEAT_NGRAM=--no-repeat-ngram PYTHON=ODE_SEQ_VENV
# shellcheck source=recipe.sh
source "$REPO_ROOT/examples/summarization/recipe.sh"

WORK_DIR="$REPO_ROOT/work-dirs/cnndm"
METHOD=rk4
CHECKPOINT=""
SUBSET=test
REF=""
OUT_DIR=""
GPUS=""
BATCH_SIZE=32
BEAM="$CNNDM_BEAM"
LENPEN="$CNNDM_LENPEN"
MIN_LEN="$CNNDM_MIN_LEN"
MAX_LEN_B="$CNNDM_MAX_LEN_B"
NO_REPEAT_NGRAM="$CNNDM_NO_REPEAT_NGRAM"
EXTRA=()

while [[ $# -gt 0 ]]; do
  case "$1" in
    --work-dir) require_option_value "$@"; WORK_DIR="$2"; shift 2 ;;
    --method) require_option_value "$@"; METHOD="$2"; shift 2 ;;
    --checkpoint) require_option_value "$@"; CHECKPOINT="$2"; shift 2 ;;
    --subset) require_option_value "$@"; SUBSET="$2"; shift 2 ;;
    --ref) require_option_value "$@"; REF="$2"; shift 2 ;;
    --out-dir) require_option_value "$@"; OUT_DIR="$2"; shift 2 ;;
    --gpus) require_option_value "$@"; GPUS="$2"; shift 2 ;;
    --batch-size) require_option_value "$@"; BATCH_SIZE="$2"; shift 2 ;;
    --beam) require_option_value "$@"; BEAM="$2"; shift 2 ;;
    --lenpen) require_option_value "$@"; LENPEN="$2"; shift 2 ;;
    --min-len) require_option_value "$@"; MIN_LEN="$2"; shift 2 ;;
    --max-len-b) require_option_value "$@"; MAX_LEN_B="$2"; shift 2 ;;
    --no-repeat-ngram) require_option_value "$@"; NO_REPEAT_NGRAM="$2"; shift 2 ;;
    --) shift; EXTRA=("$@"); break ;;
    -h|--help) usage; exit 0 ;;
    *) unknown_option "$1" ;;
  esac
done
[[ -n "${CNNDM_ARCH_OF_METHOD[$METHOD]+set}" ]] \
  || usage_error "--method must be one of: ${!CNNDM_ARCH_OF_METHOD[*]}, got $METHOD"
[[ "$SUBSET" == test || "$SUBSET" == valid ]] || usage_error "--subset must be test or valid, got $SUBSET"
require_positive --batch-size "$BATCH_SIZE"
require_positive --beam "$BEAM"
require_whole --min-len "$MIN_LEN"
require_whole --max-len-b "$MAX_LEN_B"
require_whole --no-repeat-ngram "$NO_REPEAT_NGRAM"
[[ -z "$GPUS" ]] || require_gpus "$GPUS" decoding
CHECKPOINT="${CHECKPOINT:-$WORK_DIR/checkpoints/$METHOD/checkpoint_best.pt}"
REF="${REF:-$WORK_DIR/raw/$SUBSET.target}"
OUT_DIR="${OUT_DIR:-$(dirname "$CHECKPOINT")/eval-$SUBSET}"
use_project_python

require_file "$CHECKPOINT" "train with examples/summarization/train.sh or pass --checkpoint"
require_file "$REF" "run examples/summarization/prepare.sh --work-dir $WORK_DIR or pass --ref"
if [[ -f "$WORK_DIR/bin/spm.model" ]]; then
  SUBWORD_FILES=("$WORK_DIR/bin/spm.model")
  BPE=(--bpe sentencepiece --sentencepiece-model "${SUBWORD_FILES[0]}")
elif [[ -f "$WORK_DIR/bin/encoder.json" ]]; then
  SUBWORD_FILES=("$WORK_DIR/bin/encoder.json" "$WORK_DIR/bin/vocab.bpe")
  BPE=(--bpe gpt2 --gpt2-encoder-json "${SUBWORD_FILES[0]}" --gpt2-vocab-bpe "${SUBWORD_FILES[1]}")
else
  die "no subword model (spm.model or encoder.json) in $WORK_DIR/bin; run prepare.sh --work-dir $WORK_DIR"
fi
# Outputs made with other settings or by an earlier state of the checkpoint are never reused.
DATA_ID="$(data_bin_id "$WORK_DIR/bin" "$SUBSET")"
SUBWORD_ID="$(content_id "${SUBWORD_FILES[@]}")"
REF_ID="$(content_id "$REF")"
check_run_config "$OUT_DIR" "checkpoint=$(path_from "$OUT_DIR" "$CHECKPOINT") data=$DATA_ID \
subwords=$SUBWORD_ID subset=$SUBSET ref=$REF_ID batch-size=$BATCH_SIZE beam=$BEAM lenpen=$LENPEN \
min-len=$MIN_LEN max-len-b=$MAX_LEN_B no-repeat-ngram=$NO_REPEAT_NGRAM extra=${EXTRA[*]}"
check_not_newer "$CHECKPOINT" "$OUT_DIR/generate-$SUBSET.txt"
GPUS="${GPUS:-$(default_gpus)}"
DEVICE=()
[[ "$GPUS" -gt 0 ]] || DEVICE=(--cpu)

# 1. Beam search; D- lines hold the detokenised summaries (subwords decoded by --bpe).
#    --user-dir applies ode-seq's fix that makes --no-repeat-ngram-size block on the CPU.
GENERATED="$OUT_DIR/generate-$SUBSET.txt"
if run_stage "$GENERATED" "generation"; then
  python -m fairseq_cli.generate "$WORK_DIR/bin" --user-dir "$REPO_ROOT/user_dir" \
    --task translation --source-lang source --target-lang target --gen-subset "$SUBSET" --path "$CHECKPOINT" \
    --beam "$BEAM" --lenpen "$LENPEN" --min-len "$MIN_LEN" --max-len-a 0 --max-len-b "$MAX_LEN_B" \
    --no-repeat-ngram-size "$NO_REPEAT_NGRAM" --batch-size "$BATCH_SIZE" "${BPE[@]}" \
    "${DEVICE[@]}" "${EXTRA[@]}" > "$GENERATED.tmp" 2> "$OUT_DIR/generate.log" \
    || { rm -f "$GENERATED.tmp"; die "fairseq-generate failed; see $OUT_DIR/generate.log"; }
  publish "$GENERATED.tmp" "$GENERATED"
fi

# 2. Hypotheses in corpus order, one per line; their count must equal the references'.
HYPOTHESES="$OUT_DIR/$SUBSET.hyp"
if run_stage "$HYPOTHESES" "detokenised summaries"; then
  { grep -E $'^D-[0-9]+\t' "$GENERATED" || true; } | sed 's/^D-//' | sort -t$'\t' -k1,1n | cut -f3- \
    | sed 's/^[[:space:]]*//; s/[[:space:]]*$//' > "$HYPOTHESES.tmp"
  publish "$HYPOTHESES.tmp" "$HYPOTHESES"
fi
n_hyp=$(wc -l < "$HYPOTHESES")
n_ref=$(wc -l < "$REF")
((n_hyp == n_ref)) \
  || die "$n_hyp hypotheses in $HYPOTHESES but $n_ref references in $REF; delete $OUT_DIR and decode again"

# 3. ROUGE-1/2/L/Lsum with stemming and bootstrap confidence intervals (table and JSON).
if run_stage "$OUT_DIR/rouge.txt" "ROUGE"; then
  python -m ode_seq.metrics.rouge --hyp "$HYPOTHESES" --ref "$REF" --json "$OUT_DIR/rouge.json" \
    > "$OUT_DIR/rouge.txt.tmp" || { rm -f "$OUT_DIR/rouge.txt.tmp"; die "ROUGE failed (message above)"; }
  publish "$OUT_DIR/rouge.txt.tmp" "$OUT_DIR/rouge.txt"
fi
cat "$OUT_DIR/rouge.txt"
log "scores in $OUT_DIR/rouge.json"
