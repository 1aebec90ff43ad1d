#!/usr/bin/env bash
# Average the last checkpoints of a run, translate a subset with beam search and score it:
# tokenised BLEU after compound splitting and detokenised sacreBLEU (13a, intl) with signatures.
# Each stage (average → generate → score) is skipped when its output exists in --out-dir;
# --out-dir/run-config.txt refuses a rerun with other settings or after more training.
#
# Usage: evaluate.sh --data-bin DIR --checkpoint-dir DIR --ref FILE --lang LANG [options] [-- generate options]
#   --ref FILE            detokenised references of --subset, one per line
#   --lang LANG           target language (Moses rules for tokenised BLEU and detokenisation)
#   --out-dir DIR         (default: CHECKPOINT_DIR/eval-SUBSET)
#   --average-last N      average the newest N checkpoints (default: 5; 1 = checkpoint_last.pt)
#   --checkpoint-kind K   epoch (checkpointE.pt) or update (checkpoint_E_U.pt) (default: epoch)
#   --subset NAME         (default: test)
#   --beam N --lenpen X   (default: 4, 0.6 as in the paper)
#   --remove-bpe KIND     sentencepiece or subword_nmt (default: sentencepiece)
#   --max-tokens N        generation batch size in tokens (default: 8000)
#   --gpus N              0 = decode on the CPU, 1 = on a GPU (default: 1 if CUDA is visible, else 0)
# Anything after `--` is passed to fairseq-generate.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"

DATA_BIN=""
CHECKPOINT_DIR=""
REF=""
LANG_TGT=""
OUT_DIR=""
AVERAGE_LAST=5
CHECKPOINT_KIND=epoch
SUBSET=test
BEAM=4
LENPEN=0.6
REMOVE_BPE=sentencepiece
MAX_TOKENS=8000
GPUS=""
EXTRA=()

while [[ $# -gt 0 ]]; do
  case "$1" in
    --data-bin) require_option_value "$@"; DATA_BIN="$2"; shift 2 ;;
    --checkpoint-dir) require_option_value "$@"; CHECKPOINT_DIR="$2"; shift 2 ;;
    --ref) require_option_value "$@"; REF="$2"; shift 2 ;;
    --lang) require_option_value "$@"; LANG_TGT="$2"; shift 2 ;;
    --out-dir) require_option_value "$@"; OUT_DIR="$2"; shift 2 ;;
    --average-last) require_option_value "$@"; AVERAGE_LAST="$2"; shift 2 ;;
    --checkpoint-kind) require_option_value "$@"; CHECKPOINT_KIND="$2"; shift 2 ;;
    --subset) require_option_value "$@"; SUBSET="$2"; shift 2 ;;
    --beam) require_option_value "$@"; BEAM="$2"; shift 2 ;;
    --lenpen) require_option_value "$@"; LENPEN="$2"; shift 2 ;;
    --remove-bpe) require_option_value "$@"; REMOVE_BPE="$2"; shift 2 ;;
    --max-tokens) require_option_value "$@"; MAX_TOKENS="$2"; shift 2 ;;
    --gpus) require_option_value "$@"; GPUS="$2"; shift 2 ;;
    --) shift; EXTRA=("$@"); break ;;
    -h|--help) usage; exit 0 ;;
    *) unknown_option "$1" ;;
  esac
done
[[ -n "$DATA_BIN" && -n "$CHECKPOINT_DIR" && -n "$REF" && -n "$LANG_TGT" ]] \
  || usage_error "--data-bin, --checkpoint-dir, --ref and --lang are required (see --help)"
[[ "$CHECKPOINT_KIND" == epoch || "$CHECKPOINT_KIND" == update ]] \
  || usage_error "--checkpoint-kind must be epoch or update, got $CHECKPOINT_KIND"
require_positive --average-last "$AVERAGE_LAST"
require_positive --beam "$BEAM"
require_positive --max-tokens "$MAX_TOKENS"
[[ -z "$GPUS" ]] || require_gpus "$GPUS" decoding
use_project_python
GPUS="${GPUS:-$(default_gpus)}"
DEVICE=()
[[ "$GPUS" -gt 0 ]] || DEVICE=(--cpu)
[[ -d "$DATA_BIN" ]] || die "data-bin $DATA_BIN does not exist; run the prepare script first"
require_file "$REF" "pass the detokenised references of subset '$SUBSET' with --ref"
OUT_DIR="${OUT_DIR:-$CHECKPOINT_DIR/eval-$SUBSET}"
[[ -s "$OUT_DIR/averaged.pt" ]] \
  || require_file "$CHECKPOINT_DIR/checkpoint_last.pt" "train a model into $CHECKPOINT_DIR first"
# Outputs made with other settings or from an earlier state of the run are never reused. Once the
# run's checkpoints are deleted, averaged.pt is the model, whatever averaged it.
DATA_ID="$(data_bin_id "$DATA_BIN" "$SUBSET")"
REF_ID="$(content_id "$REF")"
check_run_config "$OUT_DIR" "data-bin=$DATA_ID subset=$SUBSET beam=$BEAM lenpen=$LENPEN \
remove-bpe=$REMOVE_BPE max-tokens=$MAX_TOKENS ref=$REF_ID lang=$LANG_TGT extra=${EXTRA[*]}"
if [[ -e "$CHECKPOINT_DIR/checkpoint_last.pt" ]]; then
  check_run_config "$OUT_DIR" "checkpoints=$(path_from "$OUT_DIR" "$CHECKPOINT_DIR") average-last=$AVERAGE_LAST \
kind=$CHECKPOINT_KIND" averaging-config.txt
  check_not_newer "$CHECKPOINT_DIR/checkpoint_last.pt" "$OUT_DIR/averaged.pt"
fi

# 1. Checkpoint averaging (the paper averages the last 5 epochs).
MODEL="$OUT_DIR/averaged.pt"
if run_stage "$MODEL" "checkpoint averaging"; then
  if [[ "$AVERAGE_LAST" -eq 1 ]]; then
    cp "$CHECKPOINT_DIR/checkpoint_last.pt" "$MODEL.tmp"
    publish "$MODEL.tmp" "$MODEL"
  else
    python -m ode_seq.cli.average --inputs "$CHECKPOINT_DIR" \
      "--num-$CHECKPOINT_KIND-checkpoints" "$AVERAGE_LAST" --output "$MODEL"
  fi
fi

# 2. Beam search over the binarised subset; subword units removed, Moses tokens kept.
GENERATED="$OUT_DIR/generate-$SUBSET.txt"
if run_stage "$GENERATED" "generation"; then
  fairseq-generate "$DATA_BIN" --user-dir "$REPO_ROOT/user_dir" --path "$MODEL" \
    --gen-subset "$SUBSET" --beam "$BEAM" --lenpen "$LENPEN" --remove-bpe "$REMOVE_BPE" \
    --max-tokens "$MAX_TOKENS" "${DEVICE[@]}" "${EXTRA[@]}" > "$GENERATED.tmp" 2> "$OUT_DIR/generate.log" \
    || { rm -f "$GENERATED.tmp"; die "fairseq-generate failed; see $OUT_DIR/generate.log"; }
  publish "$GENERATED.tmp" "$GENERATED"
fi

# 3. Scores; an error names sentences that fairseq-generate skipped.
SCORES="$OUT_DIR/scores.txt"
if run_stage "$SCORES" "scoring"; then
  "$REPO_ROOT/examples/translation/score.sh" --hyp "$GENERATED" --hyp-format fairseq \
    --hyp-tokenized --ref "$REF" --lang "$LANG_TGT" --json "$OUT_DIR/scores.json" > "$SCORES.tmp" \
    || { rm -f "$SCORES.tmp"; die "scoring failed (message above)"; }
  publish "$SCORES.tmp" "$SCORES"
fi
cat "$SCORES"
