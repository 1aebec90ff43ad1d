"""Translation BLEU: tokenised BLEU after compound splitting, and detokenised sacreBLEU.

Tokenised BLEU is the WMT14 convention of Vaswani et al. (2017) used by the ODE Transformer paper:
hypotheses and references are Moses-tokenised, every hyphen between two non-space characters
becomes "##AT##-##AT##" (the Perl substitution `s{(\\S)-(\\S)}{$1 ##AT##-##AT## $2}g`, so German
compounds count as several tokens), and corpus BLEU is computed on whitespace tokens without
smoothing, as multi-bleu.perl does:

    BLEU = BP · exp(¼ Σ_{n=1..4} log p_n),   BP = min(1, exp(1 − r / c)),

p_n the clipped n-gram precision, c the hypothesis and r the reference length in tokens.
Detokenised BLEU is sacreBLEU's, reported with its signature for `tokenize=13a` and `intl`.

With ``--paired BASELINE_HYP`` each of the three BLEU scores of HYP is compared with the baseline's
by sacreBLEU's own paired bootstrap (``sacrebleu.significance.PairedTest``, test type ``bs``: the
test, confidence intervals and p-value of ``ode_seq.metrics.paired_bootstrap``).

Command line (`examples/translation/score.sh` wraps it):
    python -m ode_seq.metrics.bleu --hyp HYP --ref REF --lang de [--hyp-format fairseq]
        [--paired BASELINE_HYP [--paired-samples 1000] [--paired-seed 12345]] [--json OUT]
        [--allow-subword-marks]
Inputs are validated before anything is scored or written; see `BleuInputError`. Text that still
holds subword units is refused (`ode_seq.metrics.subword_marks`) unless --allow-subword-marks.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from sacrebleu.metrics import BLEU
from sacrebleu.metrics.bleu import BLEUScore
from sacrebleu.significance import PairedTest, Result
from sacremoses import MosesDetokenizer, MosesTokenizer

from ode_seq import text_files
from ode_seq.output_files import check_output_file, write_json_report

from .paired_bootstrap import (
    DEFAULT_SAMPLES,
    DEFAULT_SEED,
    Comparison,
    Estimate,
    PairedInputError,
    PairedReport,
    add_paired_arguments,
    check_same_length,
)
from .subword_marks import add_allow_argument, check_words

COMPOUND_HYPHEN = re.compile(r"(\S)-(\S)")
AGGRESSIVE_DASH = "@-@"
SPLIT_HYPHEN = "##AT##-##AT##"
FAIRSEQ_LINE = re.compile(r"^(?P<field>[A-Z])-(?P<id>\d+)\t")
DETOKENISED_TOKENIZERS = ("13a", "intl")
TOKENISED_METRIC = "tokenised BLEU"
MAX_IDS_IN_MESSAGE = 20


class BleuInputError(PairedInputError):
    """A hypothesis or reference file that cannot be scored; the message names file and fix."""


@dataclass(frozen=True)
class BleuReport:
    """Tokenised BLEU after compound splitting, plus sacreBLEU per tokenizer with signatures."""

    tokenised: BLEUScore
    detokenised: dict[str, BLEUScore]
    signatures: dict[str, str]

    def lines(self) -> list[str]:
        out = [f"tokenised, compound split: {self.tokenised}"]
        for name, result in self.detokenised.items():
            out.append(f"sacreBLEU {name + ':':<16}{result}")
            out.append(f"  signature: {self.signatures[name]}")
        return out

    def as_dict(self) -> dict[str, object]:
        return {
            "tokenised_compound_split": {"score": self.tokenised.score, "verbose": str(self.tokenised)},
            "sacrebleu": {
                name: {"score": s.score, "signature": self.signatures[name], "verbose": str(s)}
                for name, s in self.detokenised.items()
            },
        }


def compound_split(line: str) -> str:
    """Split hyphenated compounds: "a-b" → "a ##AT##-##AT## b"; "@-@" tokens become the marker.

    Applied token by token (the pattern cannot cross a space), so the markers themselves and
    Moses' aggressive "@-@" tokens are never split again.
    """
    tokens = []
    for token in line.split():
        if token in (AGGRESSIVE_DASH, SPLIT_HYPHEN):
            tokens.append(SPLIT_HYPHEN)
        else:
            tokens.append(COMPOUND_HYPHEN.sub(rf"\1 {SPLIT_HYPHEN} \2", token))
    return " ".join(tokens)


def moses_tokenise(lines: Sequence[str], lang: str) -> list[str]:
    """Moses tokenisation without escaping and without aggressive dash splitting."""
    tokenizer = MosesTokenizer(lang=lang)
    return [tokenizer.tokenize(line, escape=False, return_str=True) for line in lines]


def moses_detokenise(lines: Sequence[str], lang: str) -> list[str]:
    """Undo Moses tokenisation: XML escapes, aggressive "@-@" dash splits, spacing."""
    detokenizer = MosesDetokenizer(lang=lang)
    return [detokenizer.detokenize(line.split()) for line in lines]


def moses_unescape(lines: Sequence[str], lang: str) -> list[str]:
    """Replace Moses' XML escapes (&apos; &quot; &amp; …) by the characters, keeping the tokens."""
    detokenizer = MosesDetokenizer(lang=lang)
    return [detokenizer.unescape_xml(line) for line in lines]


def tokenised_metric() -> BLEU:
    """Unsmoothed corpus BLEU on whitespace tokens (multi-bleu.perl), for compound-split text."""
    return BLEU(tokenize="none", smooth_method="none", force=True)


def tokenised_bleu(hypotheses: Sequence[str], references: Sequence[str]) -> BLEUScore:
    """Unsmoothed corpus BLEU on whitespace tokens after compound splitting (multi-bleu.perl)."""
    return tokenised_metric().corpus_score(
        [compound_split(h) for h in hypotheses], [[compound_split(r) for r in references]]
    )


def both_forms(hypotheses: Sequence[str], lang: str, tokenised: bool) -> tuple[list[str], list[str]]:
    """(Moses-tokenised, detokenised) hypotheses.

    Tokenised hypotheses (XML escapes allowed) are unescaped for tokenised BLEU and detokenised
    for sacreBLEU; plain ones are tokenised like the references.
    """
    if tokenised:
        return moses_unescape(hypotheses, lang), moses_detokenise(hypotheses, lang)
    return moses_tokenise(hypotheses, lang), list(hypotheses)


def score(
    hypotheses: Sequence[str], references: Sequence[str], lang: str, hypotheses_tokenised: bool = False
) -> BleuReport:
    """Score hypotheses against detokenised references (see `both_forms`)."""
    if len(hypotheses) != len(references):
        raise BleuInputError(f"{len(hypotheses)} hypotheses but {len(references)} references")
    tokenised_hyps, plain_hyps = both_forms(hypotheses, lang, hypotheses_tokenised)
    detokenised, signatures = {}, {}
    for name in DETOKENISED_TOKENIZERS:
        metric = BLEU(tokenize=name)
        detokenised[name] = metric.corpus_score(plain_hyps, [list(references)])
        signatures[name] = str(metric.get_signature())
    return BleuReport(tokenised_bleu(tokenised_hyps, moses_tokenise(references, lang)), detokenised, signatures)


def sacrebleu_paired_bs(
    metric: BLEU,
    hypotheses: Sequence[str],
    baseline: Sequence[str],
    references: Sequence[str],
    n_samples: int,
    seed: int,
) -> tuple[Result, Result, str]:
    """sacreBLEU's paired bootstrap: (system result, baseline result, signature with bs and seed).

    PairedTest reads its seed from the environment variable SACREBLEU_SEED when it is built.
    """
    previous = os.environ.get("SACREBLEU_SEED")
    os.environ["SACREBLEU_SEED"] = str(seed)
    try:
        test = PairedTest(
            [("baseline", list(baseline)), ("system", list(hypotheses))],
            {"BLEU": metric},
            [list(references)],
            test_type="bs",
            n_samples=n_samples,
        )
    finally:
        if previous is None:
            del os.environ["SACREBLEU_SEED"]
        else:
            os.environ["SACREBLEU_SEED"] = previous
    signatures, results = test()
    (name,) = signatures
    baseline_result, system_result = results[name]
    return system_result, baseline_result, str(signatures[name])


def _comparison(metric: str, system: Result, baseline: Result, identical: bool) -> Comparison:
    """Our Comparison from sacreBLEU's results; identical outputs get p = 1 (see paired_bootstrap)."""
    return Comparison(
        metric,
        Estimate(float(system.score), float(system.mean), float(system.ci)),
        Estimate(float(baseline.score), float(baseline.mean), float(baseline.ci)),
        1.0 if identical else float(system.p_value),
    )


def paired_test(
    hypotheses: Sequence[str],
    baseline: Sequence[str],
    references: Sequence[str],
    lang: str,
    hypotheses_tokenised: bool = False,
    n_samples: int = DEFAULT_SAMPLES,
    seed: int = DEFAULT_SEED,
    names: tuple[str, str] = ("system", "baseline"),
    tokenizers: Sequence[str] = (TOKENISED_METRIC, *DETOKENISED_TOKENIZERS),
) -> tuple[PairedReport, dict[str, str]]:
    """sacreBLEU's paired bootstrap of hypotheses against a baseline for each BLEU of `score`
    (`tokenizers` picks them), with the signatures; both outputs are prepared as in `score`."""
    check_same_length(hypotheses, baseline, names[0], names[1])
    check_same_length(hypotheses, references, names[0], "references")
    system_forms = both_forms(hypotheses, lang, hypotheses_tokenised)
    baseline_forms = both_forms(baseline, lang, hypotheses_tokenised)
    comparisons, signatures = [], {}
    for name in tokenizers:
        if name == TOKENISED_METRIC:
            split = [
                [compound_split(line) for line in lines]
                for lines in (system_forms[0], baseline_forms[0], moses_tokenise(references, lang))
            ]
            system, base, signature = sacrebleu_paired_bs(tokenised_metric(), *split, n_samples, seed)
        else:
            system, base, signature = sacrebleu_paired_bs(
                BLEU(tokenize=name), system_forms[1], baseline_forms[1], references, n_samples, seed
            )
            name = f"sacreBLEU {name}"
        comparisons.append(_comparison(name, system, base, list(hypotheses) == list(baseline)))
        signatures[name] = signature
    return PairedReport(comparisons, n_samples, seed, *names), signatures


def read_text_lines(path: Path, role: str, allow_empty: bool = False, subword_marks_allowed: bool = False) -> list[str]:
    """Lines of a text file read by `ode_seq.text_files`, in words unless ``subword_marks_allowed``
    (`ode_seq.metrics.subword_marks`); errors name the file and the bad line."""
    if not path.is_file():
        raise BleuInputError(f"{role} file {path} does not exist")
    try:
        lines = text_files.read_lines(path)
    except text_files.TextInputError as error:
        raise BleuInputError(f"{role} file {error}") from None
    if not lines:
        raise BleuInputError(f"{role} file {path} is empty")
    empty = [i + 1 for i, line in enumerate(lines) if not line.strip()]
    if empty and not allow_empty:
        raise BleuInputError(
            f"{role} file {path} has {len(empty)} empty line(s), first at line "
            f"{_shorten(empty)}; every line must hold one segment"
        )
    check_words(lines, f"{role} file {path}", subword_marks_allowed)
    return lines


def read_fairseq_hypotheses(path: Path, count: int, field: str = "H", subword_marks_allowed: bool = False) -> list[str]:
    """Hypotheses of `fairseq-generate` output, ordered by sentence id 0..count-1, in words unless
    ``subword_marks_allowed`` (`ode_seq.metrics.subword_marks`).

    fairseq-generate prints sentences out of order and skips inputs it cannot translate
    (e.g. longer than --max-positions with --skip-invalid-size-inputs-valid-test); every id must
    have exactly one `FIELD-id<TAB>score<TAB>text` line, otherwise the missing ids are reported.
    An empty hypothesis is the model's real output and is kept.
    """
    by_id: dict[int, str] = {}
    lines = read_text_lines(path, "fairseq-generate", allow_empty=True, subword_marks_allowed=True)
    for number, line in enumerate(lines, 1):
        match = FAIRSEQ_LINE.match(line)
        if not match or match["field"] != field:
            continue
        parts = line.split("\t")
        if len(parts) != 3:
            raise BleuInputError(f"{path} line {number}: expected '{field}-id<TAB>score<TAB>text'")
        sentence = int(match["id"])
        if sentence in by_id:
            raise BleuInputError(f"{path}: sentence id {sentence} has two {field}- lines")
        if sentence >= count:
            raise BleuInputError(f"{path}: sentence id {sentence} but the reference has {count} lines")
        by_id[sentence] = parts[2]
    missing = [i for i in range(count) if i not in by_id]
    if missing:
        raise BleuInputError(
            f"{path}: no {field}- line for {len(missing)} of {count} sentences, ids {_shorten(missing)}; "
            "fairseq-generate skipped them (too long for --max-positions, or the run stopped early)"
        )
    hypotheses = [by_id[i] for i in range(count)]
    check_words(hypotheses, f"fairseq-generate output {path}", subword_marks_allowed, "sentence", 0)
    return hypotheses


def _shorten(ids: Sequence[int]) -> str:
    shown = ", ".join(map(str, ids[:MAX_IDS_IN_MESSAGE]))
    return shown + (f", … ({len(ids) - MAX_IDS_IN_MESSAGE} more)" if len(ids) > MAX_IDS_IN_MESSAGE else "")


def read_hypotheses(path: Path, role: str, references: list[str], args: argparse.Namespace) -> list[str]:
    """One hypothesis per reference, from a plain file or from fairseq-generate output."""
    if args.hyp_format == "fairseq":
        return read_fairseq_hypotheses(path, len(references), args.fairseq_field, args.allow_subword_marks)
    hypotheses = read_text_lines(path, role, subword_marks_allowed=args.allow_subword_marks)
    if len(hypotheses) != len(references):
        raise BleuInputError(
            f"{role} file {path} has {len(hypotheses)} lines but reference file {args.ref} has {len(references)}"
        )
    return hypotheses


def main(argv: Sequence[str] | None = None, prog: str = "python -m ode_seq.metrics.bleu") -> int:
    parser = argparse.ArgumentParser(prog=prog, description="Tokenised (compound-split) BLEU and sacreBLEU.")
    parser.add_argument(
        "--hyp",
        type=Path,
        required=True,
        help="hypotheses, one per line, or fairseq-generate output with --hyp-format fairseq",
    )
    parser.add_argument("--ref", type=Path, required=True, help="detokenised references, one per line")
    parser.add_argument("--lang", required=True, help="target language code for Moses (de, fr, es, …)")
    parser.add_argument("--hyp-format", choices=("plain", "fairseq"), default="plain")
    parser.add_argument(
        "--fairseq-field", choices=("H", "D"), default="H", help="which fairseq-generate lines hold the hypotheses"
    )
    parser.add_argument(
        "--hyp-tokenized", action="store_true", help="hypotheses are Moses-tokenised (e.g. H- lines after --remove-bpe)"
    )
    parser.add_argument("--json", type=Path, help="also write the scores here (atomically)")
    add_allow_argument(parser)
    add_paired_arguments(parser)
    args = parser.parse_args(argv)
    try:
        if args.json:
            check_output_file(str(args.json), "--json", make_directory=True)
        references = read_text_lines(args.ref, "reference", subword_marks_allowed=args.allow_subword_marks)
        hypotheses = read_hypotheses(args.hyp, "hypothesis", references, args)
        report = score(hypotheses, references, args.lang, args.hyp_tokenized)
        if args.paired:
            baseline = read_hypotheses(Path(args.paired), "baseline hypothesis", references, args)
            paired, signatures = paired_test(
                hypotheses,
                baseline,
                references,
                args.lang,
                args.hyp_tokenized,
                args.paired_samples,
                args.paired_seed,
                (str(args.hyp), args.paired),
            )
    except (BleuInputError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print("\n".join(report.lines()))
    payload = report.as_dict()
    if args.paired:
        print(
            "\n".join(
                ["", *paired.lines(), *(f"  {name} signature: {signature}" for name, signature in signatures.items())]
            )
        )
        payload["paired"] = {**paired.as_dict(), "signatures": signatures}
    if args.json:
        return write_json_report(str(args.json), payload, "error", ensure_ascii=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
