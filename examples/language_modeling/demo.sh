#!/usr/bin/env bash
# The CPU demo on the bundled Bible: prepare its English column → train a small ODE language model
# (RK2 blocks with learned stage weights; train.sh's bible recipe: 2 layers, d = 128) for a fixed,
# seeded budget of updates (below) with the learning rate decayed linearly to 0 → test perplexity
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

# The demo's budget: 1,800 updates of 2,048 tokens, about 4.3 epochs of the 863k training tokens,
# without dropout (at 4,096-token batches and dropout 0.1, the bible recipe's, the same epochs end
# at a test perplexity near 47 instead of 38.5: examples/language_modeling/README.md).
DEMO_ARCH=ode_transformer_lm_rk2_learned
BASELINE=transformer_lm
DEMO_MAX_UPDATE=1800
DEMO_MAX_TOKENS=2048
DEMO_WARMUP=300
DEMO_DROPOUT=0
parse_options "$@" <<'EOF'
--work-dir=DIR        WORK_DIR     -         $REPO_ROOT/work-dirs/lm-bible
--arch=NAME           ARCH         -         $DEMO_ARCH  # the language model to train (train.sh's bible recipe sets its size)
--compare             COMPARE                            # also train fairseq's transformer_lm (pre-norm, the same size) with the same
                                                         # recipe and budget, and score both
--gpus=N              GPUS         gpus                  # 0 = the CPU, N > 1 = data-parallel training on N GPUs
                                                         # (default: 1 if CUDA is visible, else 0)
--max-update=N        MAX_UPDATE   positive  $DEMO_MAX_UPDATE  # updates per model
--max-tokens=N        MAX_TOKENS   positive  $DEMO_MAX_TOKENS  # tokens per update
--warmup=N            WARMUP       whole     $DEMO_WARMUP      # warmup updates (then linear decay to 0 at --max-update)
--dropout=P           DROPOUT      number    $DEMO_DROPOUT     #
--lr|--seed=X         TRAIN_ARGS[]  forward  # for train.sh (its bible recipe's defaults: lr 2e-3, seed 1)
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
  log "train $arch: $MAX_UPDATE updates of $MAX_TOKENS tokens, dropout $DROPOUT, linear learning-rate decay \
${TRAIN_ARGS[*]}"
  "$HERE/train.sh" --work-dir "$WORK_DIR" --arch "$arch" --gpus "$GPUS" --max-update "$MAX_UPDATE" \
    --max-tokens "$MAX_TOKENS" --warmup "$WARMUP" --dropout "$DROPOUT" --max-epoch 0 --patience 0 \
    --schedule linear "${TRAIN_ARGS[@]}" -- "${TRAIN_EXTRA[@]}"
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
