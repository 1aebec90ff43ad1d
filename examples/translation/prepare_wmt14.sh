#!/usr/bin/env bash
# WMT14 English→German or English→French for the paper's experiments (needs internet and disk:
# ~2 GB of downloads for En-De, ~7 GB for En-Fr).
#   download (resumable, every file checked) → extract → training corpora concatenated,
#   newstest2013 (valid) and newstest2014 (test, full 3003/3003-segment version) from SGML, exactly
#   as sacreBLEU extracts them → prepare_parallel.sh: Moses normalisation + tokenisation with
#   aggressive dash splits, joint BPE (subword-nmt; 32K merges En-De, 40K En-Fr) or SentencePiece,
#   length filter (1..250 subwords, ratio 1.5), fairseq-preprocess --joined-dictionary.
# Every stage is skipped when its output exists; rerunning after a failure resumes.
#
# Usage: prepare_wmt14.sh [options]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
HERE="$REPO_ROOT/examples/translation"
parse_options "$@" <<'EOF'
--pair=en-de|en-fr    PAIR          en-de|en-fr        en-de   # the language pair
--work-dir=DIR        WORK_DIR                                 # (default: work-dirs/wmt14-PAIR under the repo root)
--download-dir=DIR    DOWNLOAD_DIR  -                  $REPO_ROOT/work-dirs/wmt14-downloads  # archives, reusable across pairs
--subword=KIND        SUBWORD       bpe|sentencepiece  bpe     # bpe or sentencepiece
--vocab-size=N        VOCAB_SIZE    positive                   # merges or pieces (default: 32000 En-De, 40000 En-Fr)
--workers=N           WORKERS       positive           $(nproc)  # (default: nproc)
EOF

# Archives: name, URL, size in bytes and checksum ("-" where no published value is known; such
# files are checked by listing the archive, and their SHA-256 is recorded in DOWNLOAD_DIR/SHA256SUMS
# so that later runs detect a changed file). Sources of the published values: sacreBLEU's dataset
# table (MD5 of the test sets), gluon-nlp's url_checksums/wmt.txt (SHA-1 and size of commoncrawl
# and news-commentary v9), and a public download script for Europarl v7 (SHA-256).
DOWNLOADS="\
europarl     https://www.statmt.org/wmt13/training-parallel-europarl-v7.tgz -         sha256:0224c7c710c8a063dfd893b0cc0830202d61f4c75c17eb8e31836103d27d96e7
commoncrawl  https://www.statmt.org/wmt13/training-parallel-commoncrawl.tgz 918311367 sha1:1c0ad85f0ebaf1d543acb009607205f5dae6627d
nc-v9        https://www.statmt.org/wmt14/training-parallel-nc-v9.tgz       80418416  sha1:c7ae7f50cd45c2f3014d78ddba25a4a8a851e27a
un           https://www.statmt.org/wmt13/training-parallel-un.tgz          -         -
giga-fren    https://www.statmt.org/wmt10/training-giga-fren.tar            -         -
newstest2013 https://statmt.org/wmt13/test.tgz                              -         md5:48eca5d02f637af44e85186847141f67
newstest2014 https://statmt.org/wmt14/test-full.tgz                         -         md5:a8cd784e006feb32ac6f3d9ec7eb389a"

# Per pair: target language, archives, training corpora as "archive:member-prefix", test SGML.
case "$PAIR" in
  en-de)
    TGT=de; DEFAULT_VOCAB=32000
    ARCHIVES=(europarl commoncrawl nc-v9 newstest2013 newstest2014)
    CORPORA=(europarl:training/europarl-v7.de-en commoncrawl:commoncrawl.de-en
             nc-v9:training/news-commentary-v9.de-en)
    TEST_SGM=(test-full/newstest2014-deen-src.en.sgm test-full/newstest2014-deen-ref.de.sgm) ;;
  en-fr)
    TGT=fr; DEFAULT_VOCAB=40000
    ARCHIVES=(europarl commoncrawl un nc-v9 giga-fren newstest2013 newstest2014)
    CORPORA=(europarl:training/europarl-v7.fr-en commoncrawl:commoncrawl.fr-en
             un:un/undoc.2000.fr-en nc-v9:training/news-commentary-v9.fr-en
             giga-fren:giga-fren.release2.fixed)
    TEST_SGM=(test-full/newstest2014-fren-src.en.sgm test-full/newstest2014-fren-ref.fr.sgm) ;;
esac
SRC=en
VALID_SGM=(test/newstest2013-src.en.sgm "test/newstest2013-src.$TGT.sgm")
WORK_DIR="${WORK_DIR:-$REPO_ROOT/work-dirs/wmt14-$PAIR}"
VOCAB_SIZE="${VOCAB_SIZE:-$DEFAULT_VOCAB}"
use_project_python
require_command curl "install curl"
lock_dir "$WORK_DIR"
lock_dir "$DOWNLOAD_DIR"  # shared by the pairs: one download at a time

archive_field() {  # archive_field NAME COLUMN (1 name, 2 url, 3 bytes, 4 checksum)
  awk -v name="$1" -v col="$2" '$1 == name { print $col }' <<< "$DOWNLOADS"
}

archive_path() {
  echo "$DOWNLOAD_DIR/$(basename "$(archive_field "$1" 2)")"
}

verify_archive() {  # verify_archive FILE NAME — size and checksum, or archive listing
  local file="$1" bytes checksum
  bytes="$(archive_field "$2" 3)"
  checksum="$(archive_field "$2" 4)"
  if [[ "$bytes" != - && "$(stat -c %s "$file")" != "$bytes" ]]; then
    echo "size $(stat -c %s "$file") instead of $bytes bytes"
    return 1
  fi
  if [[ "$checksum" != - ]]; then
    local algorithm="${checksum%%:*}" expected="${checksum#*:}" actual
    actual="$("${algorithm}sum" "$file" | cut -d' ' -f1)"
    [[ "$actual" == "$expected" ]] || { echo "$algorithm $actual instead of $expected"; return 1; }
  else
    tar -tf "$file" > /dev/null 2>&1 || { echo "not a readable tar archive"; return 1; }
  fi
}

# 1. Downloads: curl resumes partial files (FILE.part); a file is renamed only once verified.
for name in "${ARCHIVES[@]}"; do
  file="$(archive_path "$name")"
  run_stage "$file" "download of $name" || continue
  url="$(archive_field "$name" 2)"
  if ! { [[ -e "$file.part" ]] && verify_archive "$file.part" "$name" > /dev/null; }; then
    curl -fL --retry 3 --continue-at - --output "$file.part" "$url" \
      || die "download of $url failed (curl exit $?); rerun to resume, or delete $file.part to restart"
  fi
  if ! problem="$(verify_archive "$file.part" "$name")"; then
    mv "$file.part" "$file.rejected"
    die "$url: $problem; moved to $file.rejected — delete it and rerun to download again"
  fi
  if [[ "$(archive_field "$name" 4)" == - ]]; then
    (cd "$DOWNLOAD_DIR" && sha256sum "$(basename "$file.part")" | sed 's/\.part$//' >> SHA256SUMS)
    log "$name has no published checksum; its SHA-256 is recorded in $DOWNLOAD_DIR/SHA256SUMS"
  fi
  publish "$file.part" "$file"
done

# 2. Raw text: training corpora concatenated (equal line counts checked), valid/test from SGML.
if run_stage "$WORK_DIR/text" "text extraction"; then
  if [[ -s "$DOWNLOAD_DIR/SHA256SUMS" ]]; then
    (cd "$DOWNLOAD_DIR" && sha256sum --check --quiet --ignore-missing SHA256SUMS) \
      || die "an archive in $DOWNLOAD_DIR changed since it was first verified (see SHA256SUMS)"
  fi
  rm -rf "$WORK_DIR/text.tmp" "$WORK_DIR/extract.tmp" && mkdir -p "$WORK_DIR/text.tmp" "$WORK_DIR/extract.tmp"
  for corpus in "${CORPORA[@]}"; do
    archive="$(archive_path "${corpus%%:*}")"
    member="${corpus#*:}"
    for lang in "$SRC" "$TGT"; do
      if [[ "$archive" == *giga-fren.tar ]]; then
        tar -xOf "$archive" "$member.$lang.gz" | gzip -dc > "$WORK_DIR/extract.tmp/corpus.$lang"
      else
        tar -xzOf "$archive" "$member.$lang" > "$WORK_DIR/extract.tmp/corpus.$lang"
      fi
    done
    python "$HERE/parallel_text.py" check "$WORK_DIR/extract.tmp/corpus" "$SRC" "$TGT" --allow-empty >&2 \
      || die "corpus $member is not line-aligned (message above)"
    for lang in "$SRC" "$TGT"; do
      cat "$WORK_DIR/extract.tmp/corpus.$lang" >> "$WORK_DIR/text.tmp/train.$lang"
    done
  done
  for split in valid test; do
    if [[ "$split" == valid ]]; then
      archive="$(archive_path newstest2013)"; members=("${VALID_SGM[@]}")
    else
      archive="$(archive_path newstest2014)"; members=("${TEST_SGM[@]}")
    fi
    langs=("$SRC" "$TGT")
    for i in 0 1; do
      lang="${langs[$i]}"
      tar -xzOf "$archive" "${members[$i]}" > "$WORK_DIR/extract.tmp/$split.$lang.sgm"
      python "$HERE/parallel_text.py" sgm "$WORK_DIR/extract.tmp/$split.$lang.sgm" \
        > "$WORK_DIR/text.tmp/$split.$lang"
    done
  done
  rm -rf "$WORK_DIR/extract.tmp"
  publish "$WORK_DIR/text.tmp" "$WORK_DIR/text"
fi

# 3. Tokenise, learn and apply joint subwords, filter, binarise.
"$HERE/prepare_parallel.sh" --src "$SRC" --tgt "$TGT" --work-dir "$WORK_DIR" \
  --train "$WORK_DIR/text/train" --valid "$WORK_DIR/text/valid" --test "$WORK_DIR/text/test" \
  --subword "$SUBWORD" --vocab-size "$VOCAB_SIZE" --workers "$WORKERS"
REMOVE_BPE=subword_nmt
[[ "$SUBWORD" == sentencepiece ]] && REMOVE_BPE=sentencepiece
log "next: examples/translation/train_wmt14.sh --data-bin $WORK_DIR/data-bin …, then evaluate.sh" \
  "--ref $WORK_DIR/raw/test.$TGT --lang $TGT --remove-bpe $REMOVE_BPE"
