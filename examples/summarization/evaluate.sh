#!/usr/bin/env bash
# Summarise a CNN/DailyMail subset with the paper's decoding settings, detokenise, score ROUGE.
#
# Parameters (environment variables, defaults in brackets); extra arguments go to fairseq-generate:
#   DATA_DIR     prepared data (prepare.sh)                          [data/cnndm]
#   CHECKPOINT   model to decode with                                [checkpoints/cnndm-rk4/checkpoint_best.pt]
#   SUBSET       test | valid                                        [test]
#   REF          reference summaries, one per line                   [DATA_DIR/raw/SUBSET.target]
#   OUT_DIR      generate-SUBSET.txt, SUBSET.hyp, rouge.{txt,json}   [CHECKPOINT's directory/eval-SUBSET]
#   GPUS         0 decodes on the CPU                                [1]
#   BATCH_SIZE   sentences per decoding batch                        [32]
#   BEAM LENPEN MIN_LEN MAX_LEN_B NO_REPEAT_NGRAM   decoding         [4 2.0 55 140 3, recipe.sh]
#   PYTHON       interpreter with fairseq and rouge-score            [python]
# Each stage is skipped when its output exists; outputs are written to *.partial and renamed.
# OUT_DIR/run-config.txt refuses a rerun with other settings or another checkpoint.
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_ROOT="$(cd "$SCRIPT_DIR/../.." && pwd)"
# shellcheck source=recipe.sh
source "$SCRIPT_DIR/recipe.sh"

fail() { echo "evaluate.sh: error: $*" >&2; exit 2; }

DATA_DIR="${DATA_DIR:-data/cnndm}"
CHECKPOINT="${CHECKPOINT:-checkpoints/cnndm-rk4/checkpoint_best.pt}"
SUBSET="${SUBSET:-test}"
REF="${REF:-$DATA_DIR/raw/$SUBSET.target}"
OUT_DIR="${OUT_DIR:-$(dirname "$CHECKPOINT")/eval-$SUBSET}"
GPUS="${GPUS:-1}"
BATCH_SIZE="${BATCH_SIZE:-32}"
BEAM="${BEAM:-$CNNDM_BEAM}"
LENPEN="${LENPEN:-$CNNDM_LENPEN}"
MIN_LEN="${MIN_LEN:-$CNNDM_MIN_LEN}"
MAX_LEN_B="${MAX_LEN_B:-$CNNDM_MAX_LEN_B}"
NO_REPEAT_NGRAM="${NO_REPEAT_NGRAM:-$CNNDM_NO_REPEAT_NGRAM}"
PYTHON="${PYTHON:-python}"
export PYTHONPATH="$REPO_ROOT${PYTHONPATH:+:$PYTHONPATH}"

[[ -f "$CHECKPOINT" ]] || fail "checkpoint not found: $CHECKPOINT; train with train.sh or set CHECKPOINT"
[[ -f "$REF" ]] || fail "references not found: $REF; run prepare.sh with DATA_DIR=$DATA_DIR or set REF"
if [[ -f "$DATA_DIR/bin/spm.model" ]]; then
  bpe_args=(--bpe sentencepiece --sentencepiece-model "$DATA_DIR/bin/spm.model")
elif [[ -f "$DATA_DIR/bin/encoder.json" ]]; then
  bpe_args=(--bpe gpt2 --gpt2-encoder-json "$DATA_DIR/bin/encoder.json" --gpt2-vocab-bpe "$DATA_DIR/bin/vocab.bpe")
else
  fail "no subword model (spm.model or encoder.json) in $DATA_DIR/bin; run prepare.sh with DATA_DIR=$DATA_DIR"
fi
device_args=()
((GPUS == 0)) && device_args=(--cpu)
# shellcheck source=../translation/lib.sh
source "$REPO_ROOT/examples/translation/lib.sh"  # check_run_config, check_not_newer
# Outputs made with other settings or by an earlier state of the checkpoint are never reused.
check_run_config "$OUT_DIR" "checkpoint=$(realpath -m "$CHECKPOINT") data=$(realpath -m "$DATA_DIR") subset=$SUBSET ref=$(realpath -m "$REF") \
batch-size=$BATCH_SIZE beam=$BEAM lenpen=$LENPEN min-len=$MIN_LEN max-len-b=$MAX_LEN_B \
no-repeat-ngram=$NO_REPEAT_NGRAM extra=$*"
check_not_newer "$CHECKPOINT" "$OUT_DIR/generate-$SUBSET.txt"

# 1. Beam search; D- lines hold the detokenised summaries (subwords decoded by --bpe).
#    --user-dir applies ode-seq's fix that makes --no-repeat-ngram-size block on the CPU.
generated="$OUT_DIR/generate-$SUBSET.txt"
if [[ ! -f "$generated" ]]; then
  "$PYTHON" -m fairseq_cli.generate "$DATA_DIR/bin" --user-dir "$REPO_ROOT/user_dir" \
    --task translation --source-lang source --target-lang target --gen-subset "$SUBSET" --path "$CHECKPOINT" \
    --beam "$BEAM" --lenpen "$LENPEN" --min-len "$MIN_LEN" --max-len-a 0 --max-len-b "$MAX_LEN_B" \
    --no-repeat-ngram-size "$NO_REPEAT_NGRAM" --batch-size "$BATCH_SIZE" "${bpe_args[@]}" \
    "${device_args[@]}" "$@" > "$generated.partial"
  mv "$generated.partial" "$generated"
fi

# 2. Hypotheses in corpus order, one per line; their count must equal the references'
hypotheses="$OUT_DIR/$SUBSET.hyp"
if [[ ! -f "$hypotheses" ]]; then
  { grep -E $'^D-[0-9]+\t' "$generated" || true; } | sed 's/^D-//' | sort -t$'\t' -k1,1n | cut -f3- \
    | sed 's/^[[:space:]]*//; s/[[:space:]]*$//' > "$hypotheses.partial"
  mv "$hypotheses.partial" "$hypotheses"
fi
n_hyp=$(wc -l < "$hypotheses")
n_ref=$(wc -l < "$REF")
((n_hyp == n_ref)) || fail "$n_hyp hypotheses in $hypotheses but $n_ref references in $REF; delete $OUT_DIR and decode again"

# 3. ROUGE-1/2/L/Lsum with stemming and bootstrap confidence intervals (table and JSON)
if [[ ! -f "$OUT_DIR/rouge.txt" ]]; then
  "$PYTHON" -m ode_seq.metrics.rouge --hyp "$hypotheses" --ref "$REF" --json "$OUT_DIR/rouge.json" > "$OUT_DIR/rouge.txt.partial"
  mv "$OUT_DIR/rouge.txt.partial" "$OUT_DIR/rouge.txt"
fi
cat "$OUT_DIR/rouge.txt"
echo "evaluate.sh: scores in $OUT_DIR/rouge.json"
