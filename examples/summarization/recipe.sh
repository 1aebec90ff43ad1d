#!/usr/bin/env bash
# CNN/DailyMail recipe of ODE Transformer (Li et al. 2022; /work/shared/papers/ode_transformer.md).
# The one place these numbers live: prepare.sh, train.sh and evaluate.sh source this file.
# Values marked "assumed" are not stated for CNN/DM by the paper; they follow its WMT recipe.
#
# Usage: recipe.sh        print the recipe, one NAME=VALUE line per setting

# Data
CNNDM_SOURCE_SUBWORDS=500                  # sources truncated to 500 subwords

# Model: base 6-6; the three rows of the paper's CNN/DM table
declare -A CNNDM_ARCH_OF_METHOD=(
  [residual]=ode_transformer_euler
  [rk2-learned]=ode_transformer_rk2_learned
  [rk4]=ode_transformer_rk4
)

# Optimisation
CNNDM_LR=0.002
CNNDM_WARMUP_UPDATES=8000
CNNDM_WARMUP_INIT_LR=1e-07                 # assumed
CNNDM_WEIGHT_DECAY=0.0001
CNNDM_ADAM_BETAS='(0.9, 0.997)'            # assumed
CNNDM_LABEL_SMOOTHING=0.1                  # assumed
CNNDM_MAX_EPOCH=20
CNNDM_UPDATE_FREQ=4
CNNDM_GPUS=8                               # assumed
CNNDM_MAX_TOKENS=4096                      # assumed
# Effective batch per update, kept when GPU count or max-tokens change: 8 x 4096 x 4 = 131072 tokens
CNNDM_TOKENS_PER_UPDATE=$((CNNDM_GPUS * CNNDM_MAX_TOKENS * CNNDM_UPDATE_FREQ))

# Decoding
CNNDM_BEAM=4
CNNDM_LENPEN=2.0
CNNDM_MIN_LEN=55
CNNDM_MAX_LEN_B=140
CNNDM_NO_REPEAT_NGRAM=3

if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then  # executed, not sourced
  set -euo pipefail
  source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
  parse_options "$@" < /dev/null
  for name in "${!CNNDM_@}"; do
    if [[ "$name" == CNNDM_ARCH_OF_METHOD ]]; then
      for method in "${!CNNDM_ARCH_OF_METHOD[@]}"; do
        echo "CNNDM_ARCH_OF_METHOD[$method]=${CNNDM_ARCH_OF_METHOD[$method]}"
      done
    else
      echo "$name=${!name}"
    fi
  done
fi
