#!/usr/bin/env bash
# Decode one trained ODE model at several step counts without retraining (ODE-ViT: a stable ODE
# student should work at any step count at inference): for every N of --steps, fairseq-generate
# with --model-overrides "{'encoder_ode_steps': N, 'decoder_ode_steps': N}" (beam 4, lenpen 0.6),
# score it (evaluate.sh), then write OUT_DIR/results.md (N, step size, sacreBLEU, decoding time)
# and OUT_DIR/step-scores.json for `python -m ode_seq.cli.analyze --step-scores`.
# Each N's stages are skipped when their output exists in OUT_DIR/N<N>.
#
# Usage: step_counts.sh --checkpoint FILE --data-bin DIR --ref FILE --lang LANG [options] [-- generate options]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
parse_options "$@" <<'EOF'
--checkpoint=FILE     CHECKPOINT  -          required  # a fixed-grid ODE model (e.g. the distilled student's eval-test/averaged.pt)
--data-bin=DIR        DATA_BIN    -          required  # its data
--ref=FILE            REF         -          required  # detokenised references of the test set
--lang=L              LANG_TGT    -          required  # their language
--steps=LIST          STEPS       positives  1 2 3 4 6 8 12 24  # step counts of both stacks, in quotes: "N ..."
--out-dir=DIR         OUT_DIR                          # (default: the checkpoint's directory/step-counts)
--gpus=N              GPUS        decoding-gpus        # 0 = decode on the CPU, 1 = on a GPU (default: 1 if CUDA is visible, else 0)
--=OPTIONS            EXTRA[]     -          --max-len-a 1.5 --max-len-b 10  # passed to fairseq-generate
EOF
use_project_python
GPUS="${GPUS:-$(default_gpus)}"
require_file "$CHECKPOINT" "pass a trained model with --checkpoint"
OUT_DIR="${OUT_DIR:-$(dirname "$CHECKPOINT")/step-counts}"
lock_dir "$OUT_DIR"

for n in $STEPS; do
  mkdir -p "$OUT_DIR/N$n"
  # evaluate.sh decodes OUT/averaged.pt when it exists: the same checkpoint for every N.
  [[ -e "$OUT_DIR/N$n/averaged.pt" ]] || ln "$CHECKPOINT" "$OUT_DIR/N$n/averaged.pt" 2>/dev/null \
    || cp "$CHECKPOINT" "$OUT_DIR/N$n/averaged.pt"
  "$REPO_ROOT/examples/translation/evaluate.sh" --data-bin "$DATA_BIN" --checkpoint-dir "$OUT_DIR" \
    --gpus "$GPUS" --out-dir "$OUT_DIR/N$n" --ref "$REF" --lang "$LANG_TGT" \
    -- --model-overrides "{'encoder_ode_steps': $n, 'decoder_ode_steps': $n}" "${EXTRA[@]}" > /dev/null
done

# shellcheck disable=SC2086
python "$REPO_ROOT/examples/distillation/step_count_table.py" --out-dir "$OUT_DIR" --ref "$REF" \
  --checkpoint "$CHECKPOINT" --steps $STEPS > "$OUT_DIR/results.md.tmp"
publish "$OUT_DIR/results.md.tmp" "$OUT_DIR/results.md"
cat "$OUT_DIR/results.md"
