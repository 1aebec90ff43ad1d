#!/usr/bin/env bash
# Score translations: tokenised BLEU after compound splitting (##AT##-##AT##) and detokenised
# sacreBLEU with signatures (13a, intl), with `python -m ode_seq.metrics.bleu` in the project's
# environment.
#
# Usage: score.sh --hyp HYP --ref REF --lang LANG [--hyp-format fairseq] [--hyp-tokenized]
#                 [--json OUT] [--paired BASELINE_HYP [--paired-samples 1000] [--paired-seed 12345]]
# --paired adds sacreBLEU's paired bootstrap against a baseline's output (same format as HYP).
# Bad input (missing file, non-UTF-8, empty lines, line-count mismatch, sentences that
# fairseq-generate skipped) exits with status 2 and writes nothing.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"

[[ "${1:-}" == -h || "${1:-}" == --help ]] && { usage; exit 0; }
use_project_python
exec python -m ode_seq.metrics.bleu "$@"
