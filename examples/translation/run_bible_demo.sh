#!/usr/bin/env bash
# The CPU demo on the bundled English→Spanish Bible corpus: prepare → train a small ODE
# Transformer for a fixed, seeded number of updates → average its last checkpoints → beam search
# → BLEU, three test translations next to their references, and the commands that translate your
# own sentences. The same command trains the same model on any machine; only the time differs,
# and the progress lines say how much is left. Reruns reuse every finished stage in --work-dir.
#
# Usage: run_bible_demo.sh [options] [-- extra fairseq-train options]
#   --work-dir DIR        (default: work-dirs/bible-en-es)
#   --arch NAME           (default: the demo's setting below); every model is trained at the
#                         demo's width (d = 128, FFN 512) unless the extra options set another
#   --gpus N              0 = train on the CPU, N > 1 = data-parallel on N GPUs
#                         (default: 1 if CUDA is visible, else 0)
#   --compare             also train the residual baseline (ode_transformer_euler_small) with the
#                         same recipe and update budget, and report both
#   --max-update N        updates per model (default: the demo's setting)
#   --max-tokens N --lr LR --warmup N --dropout P --seed N   the recipe (default: the demo's)
#   --save-interval-updates N   checkpoint spacing; the newest 5 are averaged (default: max-update/10)
#   --keep-checkpoints    keep the training checkpoints (default: once the averaged model is
#                         scored, only it is kept, with the data and the logs)
#   --max-len-a A --max-len-b B   translations stop at A·source length + B tokens (default: 1.5, 10)
#   --train-pairs N --valid-pairs N --test-pairs N --vocab-size N --workers N   for prepare_bible.sh
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

WORK_DIR="$REPO_ROOT/work-dirs/bible-en-es"
ARCHS=("$DEMO_ARCH")
GPUS=""
BASELINE=ode_transformer_euler_small
MAX_UPDATE=$DEMO_MAX_UPDATE
MAX_TOKENS=$DEMO_MAX_TOKENS
LR=$DEMO_LR
WARMUP=$DEMO_WARMUP
DROPOUT=$DEMO_DROPOUT
SEED=1
SAVE_INTERVAL_UPDATES=""
KEEP_CHECKPOINTS=0
MAX_LEN_A=1.5
MAX_LEN_B=10
PREPARE_ARGS=(--vocab-size "$DEMO_VOCAB_SIZE")
TRAIN_EXTRA=()

while [[ $# -gt 0 ]]; do
  case "$1" in
    --work-dir) require_option_value "$@"; WORK_DIR="$2"; shift 2 ;;
    --arch) require_option_value "$@"; ARCHS[0]="$2"; shift 2 ;;
    --gpus) require_option_value "$@"; GPUS="$2"; shift 2 ;;
    --compare) ARCHS+=("$BASELINE"); shift ;;
    --max-update) require_option_value "$@"; MAX_UPDATE="$2"; shift 2 ;;
    --max-tokens) require_option_value "$@"; MAX_TOKENS="$2"; shift 2 ;;
    --lr) require_option_value "$@"; LR="$2"; shift 2 ;;
    --warmup) require_option_value "$@"; WARMUP="$2"; shift 2 ;;
    --dropout) require_option_value "$@"; DROPOUT="$2"; shift 2 ;;
    --seed) require_option_value "$@"; SEED="$2"; shift 2 ;;
    --save-interval-updates) require_option_value "$@"; SAVE_INTERVAL_UPDATES="$2"; shift 2 ;;
    --keep-checkpoints) KEEP_CHECKPOINTS=1; shift ;;
    --max-len-a) require_option_value "$@"; MAX_LEN_A="$2"; shift 2 ;;
    --max-len-b) require_option_value "$@"; MAX_LEN_B="$2"; shift 2 ;;
    --train-pairs|--valid-pairs|--test-pairs|--vocab-size|--workers)
      require_option_value "$@"; PREPARE_ARGS+=("$1" "$2"); shift 2 ;;
    --) shift; TRAIN_EXTRA=("$@"); break ;;
    -h|--help) usage; exit 0 ;;
    *) unknown_option "$1" ;;
  esac
done
require_positive --max-update "$MAX_UPDATE"
SAVE_INTERVAL_UPDATES="${SAVE_INTERVAL_UPDATES:-$(( MAX_UPDATE >= 10 ? MAX_UPDATE / 10 : 1 ))}"
require_positive --save-interval-updates "$SAVE_INTERVAL_UPDATES"
[[ -z "$GPUS" ]] || require_gpus "$GPUS"
use_project_python
GPUS="${GPUS:-$(default_gpus)}"
RECIPE="$MAX_UPDATE updates of $MAX_TOKENS tokens, lr $LR, warmup $WARMUP, dropout $DROPOUT, seed $SEED"

# The expected speed only holds for the demo's own setting, on the CPU.
demo_setting() {  # demo_setting ARCH — true when ARCH is trained exactly as measured
  [[ "$1" == "$DEMO_ARCH" && "$MAX_TOKENS" == "$DEMO_MAX_TOKENS" && ${#TRAIN_EXTRA[@]} -eq 0 \
     && " ${PREPARE_ARGS[*]} " != *" --train-pairs "* && "$GPUS" -eq 0 ]]
}

log "prepare the corpus (a few seconds; the whole log: $WORK_DIR/prepare.log)"
mkdir -p "$WORK_DIR"
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
  saved="$(find "$save_dir" -maxdepth 1 -name 'checkpoint_*_*.pt' | wc -l)"
  if [[ "$saved" -ge 2 ]]; then
    average=(--average-last "$((saved < 5 ? saved : 5))" --checkpoint-kind update)
  else
    average=(--average-last 1)
  fi
  log "translate the test set with $arch (beam 4)"
  "$HERE/evaluate.sh" --data-bin "$WORK_DIR/data-bin" --checkpoint-dir "$save_dir" \
    --gpus "$(( GPUS > 0 ))" --ref "$WORK_DIR/raw/test.es" --lang es "${average[@]}" \
    -- --max-len-a "$MAX_LEN_A" --max-len-b "$MAX_LEN_B" > /dev/null
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
