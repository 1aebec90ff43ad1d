#!/usr/bin/env bash
# Prepare a corpus for fairseq's language_modeling task (one line of text per line, binarised by
# fairseq-preprocess --only-source).
#   bible: the English column (World English Bible) of the bundled corpus
#     (examples/translation/data), split by whole chapters, so no verse of a valid or test chapter is
#     in training; one verse per line → Moses tokenisation (sacremoses, English rules, without
#     punctuation normalisation, dash splitting or escaping) → a dictionary of the training words
#     seen at least --threshold times (the others become <unk>).
#   wikitext-103: WikiText-103 (word level, already tokenised, rare words already <unk>), from
#     --wikitext-dir or downloaded (181 MB, checked by MD5) → the whole vocabulary, as fairseq's recipe.
# Each stage is skipped when its output exists; a work dir remembers its settings and refuses others.
#
# Usage: prepare.sh [options]
# Result: DIR/data-bin (fairseq), DIR/tok/{train,valid,test}.txt (bible: the tokenised text, a verse
#         a line; DIR/raw/SPLIT.{txt,ref} the verses and their references).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
HERE="$REPO_ROOT/examples/language_modeling"
parse_options "$@" <<'EOF'
--corpus=NAME         CORPUS        bible|wikitext-103  bible  # the bundled Bible (CPU) or WikiText-103 (GPU)
--work-dir=DIR        WORK_DIR                          # outputs (default: work-dirs/lm-CORPUS under the repo root)
--corpus-dir=DIR      CORPUS_DIR    -         $REPO_ROOT/examples/translation/data  # bible: the {train,valid,test}.tsv.gz corpus
--wikitext-dir=DIR    WIKITEXT_DIR                      # wikitext-103: the folder holding wiki.{train,valid,test}.tokens
                                                        # (default: download and unzip into WORK_DIR/download)
--wikitext-url=URL    WIKITEXT_URL  -         https://s3.amazonaws.com/research.metamind.io/wikitext/wikitext-103-v1.zip
--train-lines=N       TRAIN_LINES   whole     0         # bible: only the first N training verses (0 = all)
--valid-lines=N       VALID_LINES   whole     0         # likewise for validation
--test-lines=N        TEST_LINES    whole     0         # likewise for test
--threshold=N         THRESHOLD     whole               # words seen fewer times in training become <unk>
                                                        # (default: 2 for bible, 0 for wikitext-103, whose rare words are <unk> already)
--workers=N           WORKERS       positive  $(nproc)  # processes for tokenisation and binarisation (default: nproc)
EOF
WORK_DIR="$(realpath -m -- "${WORK_DIR:-$REPO_ROOT/work-dirs/lm-$CORPUS}")"
if [[ "$CORPUS" == bible ]]; then
  THRESHOLD="${THRESHOLD:-2}"
else
  THRESHOLD="${THRESHOLD:-0}"
  [[ "$TRAIN_LINES$VALID_LINES$TEST_LINES" == 000 ]] \
    || usage_error "--train-lines/--valid-lines/--test-lines take verses of the bible corpus only"
fi
WIKITEXT_MD5=9ddaacaf6af0710eda8c456decff7832  # wikitext-103-v1.zip (the value torchtext checks)
if [[ "$CORPUS" == bible ]]; then
  for split in train valid test; do
    require_file "$CORPUS_DIR/$split.tsv.gz" \
      "rebuild it with examples/translation/build_bible_corpus.py or pass --corpus-dir"
  done
fi
use_project_python
lock_dir "$WORK_DIR"

# 1. The text: bible verses Moses-tokenised into tok/; WikiText's files as they are.
if [[ "$CORPUS" == bible ]]; then
  declare -A LINES=([train]=$TRAIN_LINES [valid]=$VALID_LINES [test]=$TEST_LINES)
  DATA_ID="$(content_id "$CORPUS_DIR"/{train,valid,test}.tsv.gz)"
  check_run_config "$WORK_DIR" "corpus=bible data=$DATA_ID lines=$TRAIN_LINES/$VALID_LINES/$TEST_LINES threshold=$THRESHOLD"
  if run_stage "$WORK_DIR/raw" "verse extraction"; then
    rm -rf "$WORK_DIR/raw.tmp" && mkdir -p "$WORK_DIR/raw.tmp"
    for split in train valid test; do
      gzip -dc "$CORPUS_DIR/$split.tsv.gz" \
        | awk -F'\t' -v n="${LINES[$split]}" 'NR > 1 && (n == 0 || NR <= n + 1)' > "$WORK_DIR/raw.tmp/$split.tsv"
      [[ -s "$WORK_DIR/raw.tmp/$split.tsv" ]] || die "$CORPUS_DIR/$split.tsv.gz holds no verses"
      cut -f2 "$WORK_DIR/raw.tmp/$split.tsv" > "$WORK_DIR/raw.tmp/$split.txt"
      cut -f1 "$WORK_DIR/raw.tmp/$split.tsv" > "$WORK_DIR/raw.tmp/$split.ref"
      rm "$WORK_DIR/raw.tmp/$split.tsv"
    done
    publish "$WORK_DIR/raw.tmp" "$WORK_DIR/raw"
  fi
  if run_stage "$WORK_DIR/tok" "Moses tokenisation"; then
    rm -rf "$WORK_DIR/tok.tmp" && mkdir -p "$WORK_DIR/tok.tmp"
    for split in train valid test; do
      python "$HERE/lm_text.py" tokenize --workers "$WORKERS" < "$WORK_DIR/raw/$split.txt" > "$WORK_DIR/tok.tmp/$split.txt" \
        || die "tokenising $WORK_DIR/raw/$split.txt failed (message above)"
    done
    publish "$WORK_DIR/tok.tmp" "$WORK_DIR/tok"
  fi
  TEXT=("$WORK_DIR"/tok/{train,valid,test}.txt)
else
  if [[ -z "$WIKITEXT_DIR" ]]; then
    WIKITEXT_DIR="$WORK_DIR/download/wikitext-103"
    ARCHIVE="$WORK_DIR/download/wikitext-103-v1.zip"
    if run_stage "$ARCHIVE" "download of WikiText-103"; then
      require_command curl "install curl, or download $WIKITEXT_URL yourself and pass --wikitext-dir"
      mkdir -p "$WORK_DIR/download"
      curl -fL --retry 3 --continue-at - --output "$ARCHIVE.part" "$WIKITEXT_URL" \
        || die "download of $WIKITEXT_URL failed (curl exit $?); rerun to resume, or fetch and unzip it yourself and pass --wikitext-dir"
      [[ "$(md5sum < "$ARCHIVE.part" | cut -d' ' -f1)" == "$WIKITEXT_MD5" ]] \
        || die "$ARCHIVE.part is not wikitext-103-v1.zip (MD5 differs from $WIKITEXT_MD5); delete it and rerun"
      publish "$ARCHIVE.part" "$ARCHIVE"
    fi
    if run_stage "$WIKITEXT_DIR" "unzipping WikiText-103"; then
      require_command unzip "install unzip, or unzip $ARCHIVE yourself and pass --wikitext-dir"
      rm -rf "$WORK_DIR/download/unzip.tmp"
      unzip -q "$ARCHIVE" -d "$WORK_DIR/download/unzip.tmp" || die "unzipping $ARCHIVE failed"
      publish "$WORK_DIR/download/unzip.tmp/wikitext-103" "$WIKITEXT_DIR"
      rm -rf "$WORK_DIR/download/unzip.tmp"
    fi
  fi
  python "$HERE/lm_text.py" check-wikitext "$WIKITEXT_DIR" \
    || die "$WIKITEXT_DIR does not hold WikiText-103 (above); pass --wikitext-dir with the unzipped wikitext-103-v1.zip"
  TEXT=("$WIKITEXT_DIR"/wiki.{train,valid,test}.tokens)
  DATA_ID="$(content_id "${TEXT[@]}")"
  check_run_config "$WORK_DIR" "corpus=wikitext-103 data=$DATA_ID threshold=$THRESHOLD"
fi

# 2. Binarisation with the dictionary of the training text.
if run_stage "$WORK_DIR/data-bin" "binarisation"; then
  rm -rf "$WORK_DIR/data-bin.tmp"
  fairseq-preprocess --only-source --trainpref "${TEXT[0]}" --validpref "${TEXT[1]}" --testpref "${TEXT[2]}" \
    --thresholdsrc "$THRESHOLD" --destdir "$WORK_DIR/data-bin.tmp" --workers "$WORKERS" 2> "$WORK_DIR/preprocess.log" \
    || { rm -rf "$WORK_DIR/data-bin.tmp"; die "fairseq-preprocess failed; see $WORK_DIR/preprocess.log"; }
  publish "$WORK_DIR/data-bin.tmp" "$WORK_DIR/data-bin"
fi
log "data-bin ready: $WORK_DIR/data-bin ($(( $(wc -l < "$WORK_DIR/data-bin/dict.txt") + 4 )) symbols in the dictionary, specials and padding included; fairseq-preprocess's log: $WORK_DIR/preprocess.log)"
