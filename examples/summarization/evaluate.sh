#!/usr/bin/env bash
# Summarise a CNN/DailyMail subset with the paper's decoding settings (recipe.sh), detokenise,
# score ROUGE. Each stage is skipped when its output exists; outputs are written under a temporary
# name and renamed. OUT_DIR/run-config.txt refuses a rerun with other settings or another
# checkpoint (use another --out-dir or delete it).
#
# Usage: evaluate.sh [options] [-- extra fairseq-generate options]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
# shellcheck source=recipe.sh
source "$REPO_ROOT/examples/summarization/recipe.sh"
parse_options "$@" <<'EOF'
--work-dir=DIR        WORK_DIR         -              $REPO_ROOT/work-dirs/cnndm  # prepare.sh's work dir
--method=M            METHOD           keys:CNNDM_ARCH_OF_METHOD  rk4  # residual | rk2-learned | rk4: picks the default checkpoint
--checkpoint=FILE     CHECKPOINT                      # (default: WORK_DIR/checkpoints/METHOD/checkpoint_best.pt)
--subset=test|valid   SUBSET           test|valid     test
--ref=FILE            REF                             # reference summaries, one per line (default: WORK_DIR/raw/SUBSET.target)
--out-dir=DIR         OUT_DIR                         # generate-SUBSET.txt, SUBSET.hyp, rouge.{txt,json}
                                                      # (default: the checkpoint's directory/eval-SUBSET)
--gpus=N              GPUS             decoding-gpus  # 0 = decode on the CPU, 1 = on a GPU (default: 1 if CUDA is visible, else 0)
--batch-size=N        BATCH_SIZE       positive       32  # sentences per decoding batch
--beam=N              BEAM             positive       $CNNDM_BEAM  # decoding, as in recipe.sh: beam size
--lenpen=X            LENPEN           number         $CNNDM_LENPEN  # length penalty
--min-len=N           MIN_LEN          whole          $CNNDM_MIN_LEN  # shortest summary in tokens
--max-len-b=N         MAX_LEN_B        whole          $CNNDM_MAX_LEN_B  # longest summary in tokens
--no-repeat-ngram=N   NO_REPEAT_NGRAM  whole          $CNNDM_NO_REPEAT_NGRAM  # no n-gram of this size twice
--=OPTIONS            EXTRA[]                         # extra fairseq-generate options
EOF
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
lock_dir "$OUT_DIR"
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
