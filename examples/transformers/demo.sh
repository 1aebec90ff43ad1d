#!/usr/bin/env bash
# ODE language models in Hugging Face transformers, on the CPU, with the bundled Bible's English
# column (examples/language_modeling/prepare.sh: Moses-tokenised verses, split by chapters):
#  1. a word-level tokenizer of the training split's words seen at least twice, trained with the
#     `tokenizers` library and saved as a PreTrainedTokenizerFast (AutoTokenizer loads it);
#  2. transformers' Trainer trains a Llama-shaped ODE LM (ODELlamaForCausalLM: blocks of RK2 with
#     learned stage weights) and its residual twin (Euler: Llama itself) of the same size, with the
#     same recipe and steps; both test perplexities are printed;
#  3. the trained residual model is upcycled into RK2 with learned stage weights
#     (ODELlamaForCausalLM.from_pretrained(residual, decoder_ode_method="heun",
#     ode_coefficients="learned"): each layer's weights at both stages, new gates) and trained on;
#  4. a fairseq ODE LM (language_modeling/train.sh, RK2 learned, a short budget) is exported with
#     `ode-seq export --to hf`, loaded with AutoModelForCausalLM/AutoTokenizer (the folder's code,
#     trust_remote_code=True) and trained on in transformers; its first loss is compared with
#     fairseq's on the same batch.
# Outputs under WORK_DIR/transformers/ (each model a folder that from_pretrained loads, with
# result.json); reruns reuse every finished stage.
#
# Usage: demo.sh [options]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
HERE="$REPO_ROOT/examples/transformers"
LM="$REPO_ROOT/examples/language_modeling"
FAIRSEQ_ARCH=ode_transformer_lm_rk2_learned
parse_options "$@" <<'EOF'
--work-dir=DIR        WORK_DIR      -         $REPO_ROOT/work-dirs/lm-bible  # prepare.sh's corpus (shared with the language-model demo);
                                                        # this example's outputs go to WORK_DIR/transformers
--steps=N             STEPS         positive  150       # Trainer steps of each model trained from scratch
--upcycle-steps=N     UPCYCLE_STEPS positive  40        # Trainer steps of the upcycled model
--fairseq-updates=N   FAIRSEQ_UPDATES positive  100     # fairseq-train updates of the exported model
--continue-steps=N    CONTINUE_STEPS positive  20       # steps of the exported model in transformers
--continue-lr=LR      CONTINUE_LR   number    5e-4      # their learning rate (AdamW, constant)
--batch-size=N        BATCH_SIZE    positive  16        # blocks per step (of every model)
--block=N             BLOCK         positive  128       # tokens per block (the models' positions)
--context=N           CONTEXT       whole     64        # scoring: tokens of context before each scored token
--layers=N            LAYERS        positive  2         # Llama models: blocks
--dim=N               DIM           positive  128       # Llama models: width (FFN 4×, 2 heads)
--lr=LR               LR            number    2e-3      # Trainer's peak learning rate
--warmup=N            WARMUP        whole     20        # Trainer's warmup steps (then linear decay to 0)
--seed=N              SEED          whole     1         #
--train-lines|--valid-lines|--test-lines|--workers=N  PREPARE_ARGS[]  forward  # for prepare.sh
EOF
(( CONTEXT < BLOCK )) || usage_error "--context ($CONTEXT) must be below --block ($BLOCK)"
(( FAIRSEQ_UPDATES > 10 )) || usage_error "--fairseq-updates must exceed train.sh's 10 warmup updates, got $FAIRSEQ_UPDATES"
use_project_python
OUT="$WORK_DIR/transformers"
FAIRSEQ_DIR="$OUT/fairseq-$FAIRSEQ_ARCH"
FOLDER="$OUT/fairseq-hf"

lock_dir "$WORK_DIR"
log "prepare the corpus (the whole log: $WORK_DIR/prepare.log)"
"$LM/prepare.sh" --work-dir "$WORK_DIR" "${PREPARE_ARGS[@]}" 2>> "$WORK_DIR/prepare.log" \
  || die "preparing the corpus failed; see $WORK_DIR/prepare.log"
check_run_config "$OUT" "steps=$STEPS upcycle=$UPCYCLE_STEPS fairseq=$FAIRSEQ_UPDATES continue=$CONTINUE_STEPS/$CONTINUE_LR \
batch=$BATCH_SIZE block=$BLOCK context=$CONTEXT layers=$LAYERS dim=$DIM lr=$LR warmup=$WARMUP seed=$SEED"

log "train the fairseq model $FAIRSEQ_ARCH: $FAIRSEQ_UPDATES updates of $((BATCH_SIZE * BLOCK)) tokens, dropout 0"
"$LM/train.sh" --work-dir "$WORK_DIR" --arch "$FAIRSEQ_ARCH" --save-dir "$FAIRSEQ_DIR" --gpus 0 \
  --max-update "$FAIRSEQ_UPDATES" --max-tokens "$((BATCH_SIZE * BLOCK))" --tokens-per-sample "$BLOCK" \
  --warmup 10 --dropout 0 --max-epoch 0 --patience 0 --schedule linear --seed "$SEED"
if run_stage "$FOLDER" "export to transformers"; then
  rm -rf "$FOLDER.tmp"
  python -m ode_seq.cli.export --to hf --path "$FAIRSEQ_DIR/checkpoint_last.pt" --data "$WORK_DIR/data-bin" \
    --tokenizer moses --moses-no-dash-splits --moses-no-escape --output "$FOLDER.tmp" >&2 \
    || die "ode-seq export failed (message above)"
  publish "$FOLDER.tmp" "$FOLDER"
fi

python "$HERE/hf_lm.py" --work-dir "$OUT" --corpus "$WORK_DIR" \
  --fairseq-checkpoint "$FAIRSEQ_DIR/checkpoint_last.pt" --fairseq-folder "$FOLDER" \
  --steps "$STEPS" --upcycle-steps "$UPCYCLE_STEPS" --continue-steps "$CONTINUE_STEPS" --continue-lr "$CONTINUE_LR" \
  --batch-size "$BATCH_SIZE" --block "$BLOCK" --context "$CONTEXT" --layers "$LAYERS" --dim "$DIM" \
  --lr "$LR" --warmup "$WARMUP" --seed "$SEED" \
  || die "the transformers stages failed (message above); rerun to resume after the finished ones"
