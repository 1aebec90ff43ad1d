#!/usr/bin/env bash
# Perplexity of a trained language model on a subset (fairseq-eval-lm): the text is cut into blocks
# of --tokens-per-sample tokens that overlap by --context-window tokens, so every scored token
# sees at least that many tokens before it (all of them at the start of the text). Writes
# OUT_DIR/eval-lm.log (fairseq's output) and OUT_DIR/scores.txt, and prints the scores, once
# every token of the subset (each word and each line end) has been scored; both are
# kept until the checkpoint or a setting changes (then OUT_DIR/run-config.txt refuses the rerun).
#
# Usage: evaluate.sh [options] [-- extra fairseq-eval-lm options]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
parse_options "$@" <<EOF
$(trained_lm_options)
--subset=NAME         SUBSET        -         test      #
--tokens-per-sample=N TOKENS_PER_SAMPLE  positive  128  # block length: the training blocks' (512 for the wikitext-103 recipe)
--context-window=N    CONTEXT_WINDOW     whole     64   # tokens of context before every scored token (400 for wikitext-103)
--max-tokens=N        MAX_TOKENS    positive  4096      # tokens per batch
--out-dir=DIR         OUT_DIR                           # (default: CHECKPOINT_DIR/eval-SUBSET-CHECKPOINT)
--gpus=N              GPUS          decoding-gpus       # 0 = the CPU, 1 = a GPU (default: 1 if CUDA is visible, else 0)
--=OPTIONS            EXTRA[]                           # passed to fairseq-eval-lm
EOF
[[ "$CONTEXT_WINDOW" -lt "$TOKENS_PER_SAMPLE" ]] \
  || usage_error "--context-window ($CONTEXT_WINDOW) must be smaller than --tokens-per-sample ($TOKENS_PER_SAMPLE)"
trained_lm
OUT_DIR="${OUT_DIR:-$CHECKPOINT_DIR/eval-$SUBSET-$CHECKPOINT}"
DATA_ID="$(data_bin_id "$DATA_BIN" "$SUBSET")"
lock_dir "$OUT_DIR"
MODEL_ID="$(content_id "$MODEL")"
check_run_config "$OUT_DIR" "data-bin=$DATA_ID subset=$SUBSET model=$MODEL_ID tokens-per-sample=$TOKENS_PER_SAMPLE \
context-window=$CONTEXT_WINDOW max-tokens=$MAX_TOKENS extra=${EXTRA[*]}"

perplexity() {  # perplexity LOG — the perplexity line of LOG, which must have scored every token of SUBSET
  python "$REPO_ROOT/examples/language_modeling/lm_text.py" perplexity "$1" --subset "$DATA_BIN/$SUBSET"
}
LOG="$OUT_DIR/eval-lm.log"
if run_stage "$LOG" "fairseq-eval-lm"; then
  fairseq-eval-lm "$DATA_BIN" --user-dir "$REPO_ROOT/user_dir" --path "$MODEL" --gen-subset "$SUBSET" \
    --tokens-per-sample "$TOKENS_PER_SAMPLE" --context-window "$CONTEXT_WINDOW" --max-tokens "$MAX_TOKENS" \
    "${DEVICE[@]}" "${EXTRA[@]}" > "$LOG.tmp" 2>&1 \
    || { tail -n 20 "$LOG.tmp" >&2; rm -f "$LOG.tmp"; die "fairseq-eval-lm failed (its last lines are above)"; }
  perplexity "$LOG.tmp" > /dev/null || { rm -f "$LOG.tmp"; die "fairseq-eval-lm's output has no perplexity of \
every token of $SUBSET (message above)"; }
  publish "$LOG.tmp" "$LOG"
fi
SCORES="$OUT_DIR/scores.txt"
if run_stage "$SCORES" "scores"; then
  line="$(perplexity "$LOG")" || die "no perplexity of every token of $SUBSET in $LOG (message above)"
  echo "$SUBSET $line, context window $CONTEXT_WINDOW, $(basename "$MODEL")" > "$SCORES.tmp"
  publish "$SCORES.tmp" "$SCORES"
fi
cat "$SCORES"
