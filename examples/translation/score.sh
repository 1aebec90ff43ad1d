#!/usr/bin/env bash
# Score translations: tokenised BLEU after compound splitting (##AT##-##AT##) and detokenised
# sacreBLEU with signatures (13a, intl). All options go to `python -m ode_seq.metrics.bleu`:
#   score.sh --hyp HYP --ref REF --lang de [--hyp-format fairseq] [--hyp-tokenized] [--json OUT]
#            [--paired BASELINE_HYP [--paired-samples 1000] [--paired-seed 12345]]
# --paired adds sacreBLEU's paired bootstrap against a baseline's output (same format as HYP).
# Bad input (missing file, non-UTF-8, empty lines, line-count mismatch, sentences that
# fairseq-generate skipped) exits with status 2 and writes nothing.
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
PYTHON="${PYTHON:-python}"

PYTHONPATH="$REPO_ROOT${PYTHONPATH:+:$PYTHONPATH}" exec "$PYTHON" -m ode_seq.metrics.bleu "$@"
