#!/usr/bin/env bash
# Sample continuations of prompts from a trained language model (fairseq-interactive, top-k
# sampling, seeded): by default the first --prompt-words words of --samples lines spread over the
# test text, or the --prompt texts. A prompt is Moses-tokenised as prepare.sh tokenises the Bible
# (--tokenize none: given as the model's tokens, e.g. WikiText's), and a sample ends with its line
# (the model's end-of-line token) or after --max-len tokens. Writes OUT_DIR/samples.txt (one
# detokenised sample a line, prompt included) and prints it. Each setting (prompts, options) has
# its own default OUT_DIR, reused by reruns; a changed checkpoint is refused there.
#
# Usage: sample.sh [options] [-- extra fairseq-interactive options]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
parse_options "$@" <<EOF
$(trained_lm_options)
--prompt=TEXT         PROMPTS[]                         # a prompt (repeatable); replaces the prompts from --prompts-from
--prompts-from=FILE   PROMPTS_FROM                      # text to take prompts from (default: WORK_DIR/raw/test.txt, the test verses)
--samples=N           SAMPLES       positive  3         # prompts taken from it
--prompt-words=N      PROMPT_WORDS  positive  4         # words of each
--tokenize=KIND       TOKENIZE      moses|none  moses   # how prompts become the model's tokens, and back
--max-len=N           MAX_LEN       positive  60        # at most N tokens after the prompt
--top-k=K             TOP_K         positive  10        # sample from the K most likely tokens
--seed=N              SEED          whole     1         #
--out-dir=DIR         OUT_DIR                           # (default: CHECKPOINT_DIR/samples-CHECKPOINT-ID, ID a digest of the setting)
--gpus=N              GPUS          decoding-gpus       # 0 = the CPU, 1 = a GPU (default: 1 if CUDA is visible, else 0)
--=OPTIONS            EXTRA[]                           # passed to fairseq-interactive
EOF
HERE="$REPO_ROOT/examples/language_modeling"
trained_lm
PROMPTS_FROM="${PROMPTS_FROM:-$WORK_DIR/raw/test.txt}"
[[ ${#PROMPTS[@]} -gt 0 ]] || require_file "$PROMPTS_FROM" "pass --prompt TEXT or --prompts-from FILE"

if [[ ${#PROMPTS[@]} -gt 0 ]]; then
  PROMPT_LINES="$(printf '%s\n' "${PROMPTS[@]}")"
else
  PROMPT_LINES="$(python "$HERE/lm_text.py" prompts --text "$PROMPTS_FROM" --count "$SAMPLES" --words "$PROMPT_WORDS")" \
    || die "no prompts from $PROMPTS_FROM (message above)"
fi
SETTING="prompts=$(sha256sum <<< "$PROMPT_LINES" | cut -c1-16) tokenize=$TOKENIZE max-len=$MAX_LEN top-k=$TOP_K \
seed=$SEED extra=${EXTRA[*]}"
OUT_DIR="${OUT_DIR:-$CHECKPOINT_DIR/samples-$CHECKPOINT-$(sha256sum <<< "$SETTING" | cut -c1-8)}"
lock_dir "$OUT_DIR"
MODEL_ID="$(content_id "$MODEL")"
check_run_config "$OUT_DIR" "model=$MODEL_ID $SETTING"
if [[ ! -e "$OUT_DIR/prompts.txt" ]]; then
  echo "$PROMPT_LINES" > "$OUT_DIR/prompts.txt.tmp"
  publish "$OUT_DIR/prompts.txt.tmp" "$OUT_DIR/prompts.txt"
fi

to_tokens() { if [[ "$TOKENIZE" == moses ]]; then python "$HERE/lm_text.py" tokenize; else cat; fi; }
to_text() { if [[ "$TOKENIZE" == moses ]]; then python "$HERE/lm_text.py" detokenize; else cat; fi; }
SAMPLES_FILE="$OUT_DIR/samples.txt"
if run_stage "$SAMPLES_FILE" "sampling"; then
  to_tokens < "$OUT_DIR/prompts.txt" > "$OUT_DIR/prompt-tokens.txt"
  fairseq-interactive "$DATA_BIN" --task language_modeling --user-dir "$REPO_ROOT/user_dir" --path "$MODEL" \
    --sampling --sampling-topk "$TOP_K" --beam 1 --nbest 1 --seed "$SEED" --max-len-a 1 --max-len-b "$MAX_LEN" \
    "${DEVICE[@]}" "${EXTRA[@]}" < "$OUT_DIR/prompt-tokens.txt" > "$OUT_DIR/interactive.log" 2>&1 \
    || { tail -n 20 "$OUT_DIR/interactive.log" >&2; die "fairseq-interactive failed (its last lines are above)"; }
  grep '^H-' "$OUT_DIR/interactive.log" | sort -t- -k2 -n | cut -f3 \
    | python "$HERE/lm_text.py" with-prompts --prompts "$OUT_DIR/prompt-tokens.txt" | to_text > "$SAMPLES_FILE.tmp" \
    || die "fairseq-interactive gave $(grep -c '^H-' "$OUT_DIR/interactive.log") samples for \
$(wc -l < "$OUT_DIR/prompts.txt") prompts; see $OUT_DIR/interactive.log"
  publish "$SAMPLES_FILE.tmp" "$SAMPLES_FILE"
fi
cat "$SAMPLES_FILE"
