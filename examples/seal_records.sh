#!/usr/bin/env bash
# Seal run records written before records carried a manifest (examples/lib.sh, "Run records"): the
# studies refuse a record without one. Every record under --record-dir (a directory seedS, where
# language_modeling/study.sh and translation/quality_study.sh write a run's record) that has no
# MANIFEST.sha256 is checked (it holds the files every record of its kind holds, each a gzip
# file that decompresses in full, CRC and length, to something) and then given its manifest; one
# with a manifest is checked against it. A record that fails is named with the fix, and nothing is
# written into it. Run it once, on records you trust (e.g. as committed), and commit the manifests.
#
# Usage: seal_records.sh --record-dir DIR
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
parse_options "$@" <<'EOF'
--record-dir=DIR      RECORD_DIR     -          required  # a study's --record-dir, or one record in it
EOF
[[ -d "$RECORD_DIR" ]] || usage_error "--record-dir $RECORD_DIR is not a directory"

kind_files() {  # kind_files RECORD — the files every record of RECORD's kind holds (the FILEs that
  if [[ -e "$1/run-config.txt.gz" ]]; then  # study.sh and quality_study.sh give record_run, .gz)
    echo run-config.txt.gz data-id.txt.gz train.log.gz eval-test/scores.json.gz eval-test/generate-test.txt.gz
  elif [[ -e "$1/tuning-recipe.txt.gz" ]]; then
    echo tuning-recipe.txt.gz data-id.txt.gz tuning.log.gz
  elif [[ -e "$1/checkpoint_last.pt.gz" ]]; then  # a run kept by study.sh --keep-unfinished
    echo recipe.txt.gz data-id.txt.gz train.log.gz checkpoint_last.pt.gz
  else
    echo recipe.txt.gz data-id.txt.gz train.log.gz eval-test/scores.txt.gz eval-test/verse-scores.txt.gz
  fi
}

unsealed_damage() {  # unsealed_damage RECORD — what keeps RECORD (without a manifest) from being sealed, one a line
  local file error
  for file in $(kind_files "$1"); do
    [[ -e "$1/$file" ]] || echo "$file is missing"
  done
  while IFS= read -r -d '' file; do
    if [[ "$file" != *.gz ]]; then
      echo "$file is not gzip-compressed"
    elif ! error="$(gzip -t -- "$1/$file" 2>&1)"; then
      error="${error//$'\n'/ }"
      echo "$file does not decompress in full (${error# })"
    elif [[ "$(gzip -dc -- "$1/$file" | head -c 1 | wc -c)" -eq 0 ]]; then
      echo "$file is empty"
    fi
  done < <(record_files "$1")
}

sealed=0 intact=0 failed=0
while IFS= read -r -d '' record; do
  if [[ -e "$record/$RECORD_MANIFEST" ]]; then
    damage="$(record_damage "$record")"
    [[ -n "$damage" ]] || { intact=$((intact + 1)); continue; }
  else
    damage="$(unsealed_damage "$record")"
    if [[ -z "$damage" ]]; then
      write_manifest "$record"
      log "sealed $record"
      sealed=$((sealed + 1))
      continue
    fi
  fi
  failed=$((failed + 1))
  echo "$SCRIPT_NAME: error: the record $record cannot be sealed: ${damage//$'\n'/; }. Rerun that cell: \
rm -r $record and the run's directory in the study's work dir, then the study's command" >&2
done < <(find "$RECORD_DIR" -type d -name 'seed[0-9]*' -print0 | LC_ALL=C sort -z)
[[ $((sealed + intact + failed)) -gt 0 ]] \
  || usage_error "$RECORD_DIR holds no records (directories seedS); give a study's --record-dir"
log "$sealed records sealed, $intact sealed before and intact, $failed refused (under $RECORD_DIR)"
[[ "$failed" -eq 0 ]] || die "$failed records under $RECORD_DIR were not sealed (messages above)"
