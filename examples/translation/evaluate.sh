#!/usr/bin/env bash
# Average the last checkpoints of a run, translate a subset with beam search and score it:
# tokenised BLEU after compound splitting and detokenised sacreBLEU (13a, intl) with signatures.
# Each stage (average → generate → score) is skipped when its output exists in --out-dir;
# --out-dir/run-config.txt refuses a rerun with other settings or after more training.
#
# Usage: evaluate.sh --data-bin DIR --checkpoint-dir DIR --ref FILE --lang LANG [options] [-- generate options]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
parse_options "$@" <<'EOF'
--data-bin=DIR        DATA_BIN         -              required  # binarised data (the prepare script's data-bin)
--checkpoint-dir=DIR  CHECKPOINT_DIR   -              required  # the run's checkpoints
--ref=FILE            REF              -              required  # detokenised references of --subset, one per line
--lang=LANG           LANG_TGT         -              required  # target language (Moses rules for tokenised BLEU and detokenisation)
--out-dir=DIR         OUT_DIR                                   # (default: CHECKPOINT_DIR/eval-SUBSET)
--average-last=N      AVERAGE_LAST     positive       5         # average the newest N checkpoints (1 = checkpoint_last.pt)
--checkpoint-kind=K   CHECKPOINT_KIND  epoch|update   epoch     # epoch (checkpointE.pt) or update (checkpoint_E_U.pt)
--subset=NAME         SUBSET           -              test      #
--beam=N              BEAM             positive       4         # beam size, as in the paper
--lenpen=X            LENPEN           number         0.6       # length penalty, as in the paper
--remove-bpe=KIND     REMOVE_BPE       sentencepiece|subword_nmt  sentencepiece  # sentencepiece or subword_nmt
--max-tokens=N        MAX_TOKENS       positive       8000      # generation batch size in tokens
--gpus=N              GPUS             decoding-gpus            # 0 = decode on the CPU, 1 = on a GPU (default: 1 if CUDA is visible, else 0)
--=OPTIONS            EXTRA[]                                   # passed to fairseq-generate
EOF
use_project_python
GPUS="${GPUS:-$(default_gpus)}"
DEVICE=()
[[ "$GPUS" -gt 0 ]] || DEVICE=(--cpu)
[[ -d "$DATA_BIN" ]] || die "data-bin $DATA_BIN does not exist; run the prepare script first"
require_file "$REF" "pass the detokenised references of subset '$SUBSET' with --ref"
OUT_DIR="${OUT_DIR:-$CHECKPOINT_DIR/eval-$SUBSET}"
[[ -s "$OUT_DIR/averaged.pt" ]] \
  || require_file "$CHECKPOINT_DIR/checkpoint_last.pt" "train a model into $CHECKPOINT_DIR first"
lock_dir "$OUT_DIR"
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
