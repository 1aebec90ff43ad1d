#!/usr/bin/env bash
# The CPU demo on the bundled Bible: prepare its English column → train a small ODE language model
# (RK2 blocks with learned stage weights; train.sh's bible recipe: 2 layers, d = 128) for a fixed,
# seeded budget of updates with the learning rate decayed linearly to 0 → test perplexity
# (evaluate.sh: fairseq-eval-lm, context window 64) → samples (sample.sh) → the command that
# samples your own prompts. With --compare, fairseq's transformer_lm of the same size (pre-norm:
# the residual model) is trained with the same recipe and budget and scored next to it. The same
# command trains the same models on any machine; only the time differs. Reruns reuse every
# finished stage in --work-dir.
#
# Usage: demo.sh [options] [-- extra fairseq-train options]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
HERE="$REPO_ROOT/examples/language_modeling"

# The demo's budget: 900 updates of 4,096 tokens, about 4.3 epochs of the 863k training tokens.
DEMO_ARCH=ode_transformer_lm_rk2_learned
BASELINE=transformer_lm
DEMO_MAX_UPDATE=900
parse_options "$@" <<'EOF'
--work-dir=DIR        WORK_DIR     -         $REPO_ROOT/work-dirs/lm-bible
--arch=NAME           ARCH         -         $DEMO_ARCH  # the language model to train (train.sh's bible recipe sets its size)
--compare             COMPARE                            # also train fairseq's transformer_lm (pre-norm, the same size) with the same
                                                         # recipe and budget, and score both
--gpus=N              GPUS         gpus                  # 0 = the CPU, N > 1 = data-parallel training on N GPUs
                                                         # (default: 1 if CUDA is visible, else 0)
--max-update=N        MAX_UPDATE   positive  $DEMO_MAX_UPDATE  # updates per model
--lr|--warmup|--seed|--max-tokens|--dropout=X  TRAIN_ARGS[]  forward  # for train.sh (its bible recipe's defaults)
--train-lines|--valid-lines|--test-lines|--workers=N  PREPARE_ARGS[]  forward  # for prepare.sh
--samples|--prompt-words|--max-len|--top-k=N  SAMPLE_ARGS[]  forward  # for sample.sh
--=OPTIONS            TRAIN_EXTRA[]                      # extra fairseq-train options
EOF
ARCHS=("$ARCH")
[[ "$COMPARE" -eq 0 ]] || ARCHS+=("$BASELINE")
use_project_python
GPUS="${GPUS:-$(default_gpus)}"
DECODING_GPUS=$((GPUS > 0))

lock_dir "$WORK_DIR"
log "prepare the corpus (the whole log: $WORK_DIR/prepare.log)"
"$HERE/prepare.sh" --work-dir "$WORK_DIR" "${PREPARE_ARGS[@]}" 2>> "$WORK_DIR/prepare.log" \
  || die "preparing the corpus failed; see $WORK_DIR/prepare.log"
declare -A SCORES=()
for arch in "${ARCHS[@]}"; do
  log "train $arch: $MAX_UPDATE updates, linear learning-rate decay ${TRAIN_ARGS[*]}"
  "$HERE/train.sh" --work-dir "$WORK_DIR" --arch "$arch" --gpus "$GPUS" --max-update "$MAX_UPDATE" \
    --max-epoch 0 --patience 0 --schedule linear "${TRAIN_ARGS[@]}" -- "${TRAIN_EXTRA[@]}"
  log "test perplexity of $arch"
  SCORES[$arch]="$("$HERE/evaluate.sh" --work-dir "$WORK_DIR" --arch "$arch" --gpus "$DECODING_GPUS")"
done
log "samples of $ARCH"
SAMPLED="$("$HERE/sample.sh" --work-dir "$WORK_DIR" --arch "$ARCH" --gpus "$DECODING_GPUS" "${SAMPLE_ARGS[@]}")"

echo
echo "Bible test set ($(wc -l < "$WORK_DIR/raw/test.txt") verses), $MAX_UPDATE updates per model:"
for arch in "${ARCHS[@]}"; do
  echo "== $arch: ${SCORES[$arch]}"
done
echo
echo "Samples of $ARCH (top-k sampling; each line starts with its prompt):"
sed 's/^/  /' <<< "$SAMPLED"
cat <<EOF

Sample your own prompts: $HERE/sample.sh --work-dir $WORK_DIR --arch $ARCH --prompt "In the beginning" --seed 2
Model: $WORK_DIR/checkpoints/$ARCH/checkpoint_best.pt; training log: $WORK_DIR/checkpoints/$ARCH/train.log
EOF
