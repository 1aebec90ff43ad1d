#!/usr/bin/env bash
# The CPU demo on the bundled English→Spanish Bible corpus: prepare → train a small ODE
# Transformer for a fixed, seeded number of updates → average its last checkpoints → beam search
# → BLEU, three test translations next to their references, and the commands that translate your
# own sentences. The same command trains the same model on any machine; only the time differs,
# and the progress lines say how much is left. Reruns reuse every finished stage in --work-dir.
#
# Usage: run_bible_demo.sh [options] [-- extra fairseq-train options]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
HERE="$REPO_ROOT/examples/translation"

# The demo's setting: the best test BLEU of the sweep in docs/demo.md whose whole run fits in 15
# minutes on an idle 2-core machine of the slower kind. EXPECTED_UPS is its training speed there:
# half the 3.2 updates/s measured on the faster kind (docs/demo.md).
# Its width (embeddings 128, FFN 512) goes before the extra fairseq-train options, which can
# override it.
DEMO_ARCH=ode_transformer_rk2_learned_small
DEMO_WIDTH=(--encoder-embed-dim 128 --decoder-embed-dim 128
            --encoder-ffn-embed-dim 512 --decoder-ffn-embed-dim 512)
DEMO_MAX_UPDATE=870
DEMO_MAX_TOKENS=2048
DEMO_LR=3e-3
DEMO_WARMUP=300
DEMO_DROPOUT=0
DEMO_VOCAB_SIZE=4000
EXPECTED_UPS=1.5

BASELINE=ode_transformer_euler_small
parse_options "$@" <<'EOF'
--work-dir=DIR        WORK_DIR     -         $REPO_ROOT/work-dirs/bible-en-es
--arch=NAME           ARCH         -         $DEMO_ARCH  # every model is trained at the demo's width (d = 128, FFN 512)
                                                         # unless the extra options set another
--gpus=N              GPUS         gpus                  # 0 = train on the CPU, N > 1 = data-parallel on N GPUs
                                                         # (default: 1 if CUDA is visible, else 0)
--compare             COMPARE                            # also train the residual baseline (ode_transformer_euler_small) with the
                                                         # same recipe and update budget, and report both
--max-update=N        MAX_UPDATE   positive  $DEMO_MAX_UPDATE  # updates per model
--max-tokens=N        MAX_TOKENS   positive  $DEMO_MAX_TOKENS  # tokens per batch
--lr=LR               LR           number    $DEMO_LR          # peak learning rate
--warmup=N            WARMUP       whole     $DEMO_WARMUP      # warmup updates
--dropout=P           DROPOUT      number    $DEMO_DROPOUT     # dropout
--seed=N              SEED         whole     1                 # the seed of the recipe
--save-interval-updates=N  SAVE_INTERVAL_UPDATES  positive  # checkpoint spacing; the newest 5 are averaged (default: max-update/10)
--keep-checkpoints    KEEP_CHECKPOINTS                   # keep the training checkpoints (default: once the averaged model is
                                                         # scored, only it is kept, with the data and the logs)
--max-len-a=A         MAX_LEN_A    number    1.5         # translations stop at A·source length + B tokens
--max-len-b=B         MAX_LEN_B    whole     10
--train-pairs|--valid-pairs|--test-pairs|--vocab-size|--workers=N  PREPARE_ARGS[]  forward  --vocab-size $DEMO_VOCAB_SIZE
                                                         # for prepare_bible.sh
--=OPTIONS            TRAIN_EXTRA[]                      # extra fairseq-train options
EOF
ARCHS=("$ARCH")
[[ "$COMPARE" -eq 0 ]] || ARCHS+=("$BASELINE")
SAVE_INTERVAL_UPDATES="${SAVE_INTERVAL_UPDATES:-$(( MAX_UPDATE >= 10 ? MAX_UPDATE / 10 : 1 ))}"
use_project_python
GPUS="${GPUS:-$(default_gpus)}"
RECIPE="$MAX_UPDATE updates of $MAX_TOKENS tokens, lr $LR, warmup $WARMUP, dropout $DROPOUT, seed $SEED"

# The expected speed only holds for the demo's own setting, on the CPU.
demo_setting() {  # demo_setting ARCH — true when ARCH is trained exactly as measured
  [[ "$1" == "$DEMO_ARCH" && "$MAX_TOKENS" == "$DEMO_MAX_TOKENS" && ${#TRAIN_EXTRA[@]} -eq 0 \
     && " ${PREPARE_ARGS[*]} " != *" --train-pairs "* && "$GPUS" -eq 0 ]]
}

lock_dir "$WORK_DIR"
log "prepare the corpus (a few seconds; the whole log: $WORK_DIR/prepare.log)"
"$HERE/prepare_bible.sh" --work-dir "$WORK_DIR" "${PREPARE_ARGS[@]}" 2>> "$WORK_DIR/prepare.log" \
  || die "preparing the corpus failed; see $WORK_DIR/prepare.log"

for arch in "${ARCHS[@]}"; do
  save_dir="$WORK_DIR/checkpoints/$arch"
  expected=()
  demo_setting "$arch" && expected=(--expected-ups "$EXPECTED_UPS")
  log "train $arch: $RECIPE"
  "$HERE/train_bible.sh" --data-bin "$WORK_DIR/data-bin" --save-dir "$save_dir" --arch "$arch" \
    --minutes 0 --max-update "$MAX_UPDATE" --max-tokens "$MAX_TOKENS" --lr "$LR" --warmup "$WARMUP" \
    --seed "$SEED" --gpus "$GPUS" --save-interval-updates "$SAVE_INTERVAL_UPDATES" "${expected[@]}" \
    -- "${DEMO_WIDTH[@]}" --dropout "$DROPOUT" "${TRAIN_EXTRA[@]}"
  log "translate the test set with $arch (beam 4)"
  bible_test_scores "$WORK_DIR" "$save_dir" "$GPUS" -- --max-len-a "$MAX_LEN_A" --max-len-b "$MAX_LEN_B"
  if [[ "$KEEP_CHECKPOINTS" -eq 0 ]]; then  # checkpoint_last.pt first: without it, a rerun after a kill
    rm -f "$save_dir/checkpoint_last.pt"   # here takes averaged.pt as the model, whatever is left
    find "$save_dir" -maxdepth 1 -name 'checkpoint*.pt' -delete
  fi
done

echo
echo "English→Spanish Bible test set ($(wc -l < "$WORK_DIR/raw/test.es") verses), beam 4, lenpen 0.6:"
for arch in "${ARCHS[@]}"; do
  echo "== $arch ($RECIPE)"
  cat "$WORK_DIR/checkpoints/$arch/eval-test/scores.txt"
done

MODEL_DIR="$WORK_DIR/checkpoints/${ARCHS[0]}/eval-test"
echo
echo "Test verses translated by ${ARCHS[0]}:"
python "$HERE/show_translations.py" --generated "$MODEL_DIR/generate-test.txt" \
  --source "$WORK_DIR/raw/test.en" --reference "$WORK_DIR/raw/test.es" --lang es
SENTENCE="In the beginning God created the heavens and the earth."
cat <<EOF
Translate your own sentences (in the project's environment: source ${ODE_SEQ_VENV:-$REPO_ROOT/.venv}/bin/activate):
  echo "$SENTENCE" | fairseq-interactive $WORK_DIR/data-bin --user-dir $REPO_ROOT/user_dir --path $MODEL_DIR/averaged.pt --source-lang en --target-lang es --tokenizer moses --bpe sentencepiece --sentencepiece-model $WORK_DIR/spm.model --beam 4 --lenpen 0.6 2>/dev/null | grep ^D- | cut -f3
  cd $REPO_ROOT && python -W ignore -c "import user_dir; from fairseq.models.transformer import TransformerModel as M; m = M.from_pretrained('$MODEL_DIR', checkpoint_file='averaged.pt', data_name_or_path='$WORK_DIR/data-bin', tokenizer='moses', bpe='sentencepiece', sentencepiece_model='$WORK_DIR/spm.model'); print(m.translate('$SENTENCE', beam=4, lenpen=0.6))"
Model: $MODEL_DIR/averaged.pt ($(du -h "$MODEL_DIR/averaged.pt" | cut -f1)); training log: $WORK_DIR/checkpoints/${ARCHS[0]}/train.log
EOF
