"""The bad-input catalogue of docs/reliability.md: each input gives a non-zero exit, leaves no
half-written output, and ends with an error naming the problem and the fix.

Each case runs its tool once; the exit/output test and the message test read the same result.
An ``xfail`` names the function where the behaviour has to change; it is strict, so the test
fails as soon as that change lands and the marker must go.
"""

from __future__ import annotations

import random
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, List, Sequence, Tuple

import pytest
import torch
from fairseq import tasks

from ode_seq.checkpoint_files import load_checkpoint
from testkit.in_process import parse_training_args, run_in_process
from tests.e2e.cli import ROOT, TINY_MODEL, run
from tests.e2e.corpus import reversal_pairs, write_parallel
from tests.reliability.corpus import (
    OPTIMISATION,
    QUIET_CPU,
    RK4_LEARNED,
    final_error,
    resumable_training,
)

Command = Tuple[str, List[str]]  # (tool, arguments)
MAX_POSITIONS = ["--max-source-positions", "16", "--max-target-positions", "16"]
LONG_AT = {"train": 0, "valid": 2, "test": 2}  # the over-long sentence of each split
FIXTURES = Path(ROOT) / "tests" / "fixtures"  # dictionaries and one tiny checkpoint per model family
DOPRI5 = ["--arch", "ode_transformer_parallel_shared_dopri5", "--encoder-share-group-size", "2"]
PREPROCESS = [
    "--user-dir",
    "user_dir",
    "--source-lang",
    "src",
    "--target-lang",
    "tgt",
    "--joined-dictionary",
    "--workers",
    "1",
]


@dataclass(frozen=True)
class Paths:
    """Where a case writes its input, and the good data and checkpoint it may start from."""

    case: Path  # an empty directory for the case
    data_bin: Path  # a good binarised corpus
    over_long: Path  # a binarised corpus with an over-long sentence per split (``LONG_AT``)
    checkpoint: Path  # a good RK4 checkpoint


@dataclass(frozen=True)
class BadInput:
    """How to produce the input, what the error must say, what must not be written."""

    setup: Callable[[Paths], Command]
    problem: str  # regex on the final error: names the problem
    fix: str  # regex on the final error: names the fix
    outputs: Sequence[str] = ()  # glob patterns under the case directory that must match nothing
    kept: Sequence[str] = ()  # files under the case directory whose bytes must not change
    exit_xfail: str = ""  # why the exit/output check fails today, if it does
    message_xfail: str = ""  # why the message check fails today, if it does


def _train(data: Path, save: Path, *extra: str) -> List[str]:
    """One update of the RK4 model, validated once at the end unless ``extra`` disables it."""
    return [str(data), *RK4_LEARNED, *OPTIMISATION, *QUIET_CPU, "--max-update", "1", "--save-dir", str(save), *extra]


def _bin_without(paths: Paths, *names: str) -> Path:
    data = paths.case / "bin"
    shutil.copytree(paths.data_bin, data)
    for name in names:
        for path in data.glob(name):
            path.unlink()
    return data


def _raw(paths: Paths, sources: Sequence[str], targets: Sequence[str]) -> Command:
    write_parallel(paths.case / "train", sources, targets)
    return "fairseq-preprocess", [
        *PREPROCESS,
        "--trainpref",
        str(paths.case / "train"),
        "--destdir",
        str(paths.case / "out"),
    ]


def _sentences(n: int) -> List[str]:
    return [" ".join(p) for p in reversal_pairs(n, random.Random(1))]


def _preprocess_with_over_long_sentence(directory: Path, destdir: Path, data_bin: Path) -> None:
    """Splits of 100/10/10 sentences with a 40-word pair at ``LONG_AT``, binarised with
    ``data_bin``'s dictionary."""
    for split, n in (("train", 100), ("valid", 10), ("test", 10)):
        sentences = _sentences(n)
        sentences[LONG_AT[split]] = " ".join(["w1", "w2"] * 20)
        write_parallel(directory / split, sentences, sentences)
    prefixes = [a for split in LONG_AT for a in (f"--{split}pref", str(directory / split))]
    run(
        "fairseq-preprocess",
        [*PREPROCESS, *prefixes, "--srcdict", str(data_bin / "dict.src.txt"), "--destdir", str(destdir)],
    )


def _learned_gates_on_euler(paths: Paths) -> Command:
    args = _train(paths.data_bin, paths.case / "ckpt")
    args[args.index("ode_transformer_rk4_encdec_small")] = "ode_transformer_euler_small"
    return "fairseq-train", args


def _unknown_method(paths: Paths) -> Command:
    return "fairseq-train", _train(paths.data_bin, paths.case / "ckpt", "--encoder-ode-method", "rk9")


def _missing_dictionary(paths: Paths) -> Command:
    return "fairseq-train", _train(_bin_without(paths, "dict.tgt.txt"), paths.case / "ckpt")


def _missing_split(paths: Paths) -> Command:
    return "fairseq-train", _train(_bin_without(paths, "train.*"), paths.case / "ckpt")


def _unequal_line_counts(paths: Paths) -> Command:
    sentences = _sentences(50)
    return _raw(paths, sentences, sentences[:49])


def _unequal_binarised_sizes(paths: Paths) -> Command:
    data = _bin_without(paths, "train.src-tgt.tgt.*")
    for suffix in ("bin", "idx"):
        shutil.copy(data / f"valid.src-tgt.tgt.{suffix}", data / f"train.src-tgt.tgt.{suffix}")
    return "fairseq-train", _train(data, paths.case / "ckpt")


def _non_utf8(paths: Paths) -> Command:
    sentences = _sentences(10)
    command = _raw(paths, sentences, sentences)
    source = paths.case / "train.src"
    lines = source.read_bytes().split(b"\n")
    lines[6] = b"w1 \xff\xfe w2"
    source.write_bytes(b"\n".join(lines))
    return command


def _empty_lines(paths: Paths) -> Command:
    sources, targets = _sentences(10), _sentences(10)
    sources[3], targets[3], sources[5] = "", "", " \t "
    return _raw(paths, sources, targets)


def _over_long_validation(paths: Paths) -> Command:
    return "fairseq-train", _train(paths.over_long, paths.case / "ckpt", *MAX_POSITIONS)


def _truncate(source: Path, path: Path) -> None:
    data = source.read_bytes()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data[: len(data) // 2])


def _truncated_checkpoint_last(paths: Paths) -> Command:
    save = paths.case / "ckpt"
    _truncate(paths.checkpoint, save / "checkpoint_last.pt")
    return "fairseq-train", resumable_training(paths.data_bin, save)


def _truncated_to_average(paths: Paths) -> Command:
    _truncate(paths.checkpoint, paths.case / "truncated.pt")
    return "python", [
        "-m",
        "ode_seq.cli.average",
        "--inputs",
        str(paths.case / "truncated.pt"),
        str(paths.checkpoint),
        "--output",
        str(paths.case / "averaged.pt"),
    ]


def _corrupted_to_generate(paths: Paths) -> Command:
    """A checkpoint whose bytes changed in the middle of a tensor (a bad disk or copy)."""
    data = bytearray(paths.checkpoint.read_bytes())
    middle = len(data) // 2
    data[middle : middle + 64] = bytes(b ^ 0xFF for b in data[middle : middle + 64])
    (paths.case / "corrupted.pt").write_bytes(bytes(data))
    return "fairseq-generate", [
        str(paths.data_bin),
        "--user-dir",
        "user_dir",
        "--path",
        str(paths.case / "corrupted.pt"),
        "--gen-subset",
        "valid",
        "--results-path",
        str(paths.case / "generated"),
    ]


def _run_beside(paths: Paths, *names: str) -> Path:
    """A save directory holding a run's checkpoints under ``names``."""
    save = paths.case / "ckpt"
    save.mkdir()
    for name in names:
        shutil.copy(paths.checkpoint, save / name)
    return save


def _missing_restore_file(paths: Paths) -> Command:
    save = _run_beside(paths, "checkpoint_last.pt", "checkpoint_best.pt")
    return "fairseq-train", _train(paths.data_bin, save, "--restore-file", str(save / "chekpoint_last.pt"))


def _directory_as_restore_file(paths: Paths) -> Command:
    save = _run_beside(paths, "checkpoint_last.pt", "checkpoint_best.pt")
    return "fairseq-train", _train(paths.data_bin, save, "--restore-file", str(save))


def _run_without_checkpoint_last(paths: Paths) -> Command:
    save = _run_beside(paths, "checkpoint1.pt", "checkpoint_best.pt")
    return "fairseq-train", _train(paths.data_bin, save)


def _missing_continue_once(paths: Paths) -> Command:
    save = _run_beside(paths, "checkpoint_best.pt")
    return "fairseq-train", _train(paths.data_bin, save, "--continue-once", str(paths.case / "gone.pt"))


def _tight_tolerances(paths: Paths) -> Command:
    return "fairseq-train", [
        str(paths.data_bin),
        "--user-dir",
        "user_dir",
        *DOPRI5,
        *TINY_MODEL,
        "--share-all-embeddings",
        *OPTIMISATION,
        *QUIET_CPU,
        "--max-update",
        "1",
        "--save-dir",
        str(paths.case / "ckpt"),
        "--ode-rtol",
        "1e-12",
        "--ode-atol",
        "1e-12",
    ]


def _generate(paths: Paths, checkpoint: Path, *extra: str) -> Command:
    return "fairseq-generate", [
        str(paths.data_bin),
        "--user-dir",
        "user_dir",
        "--path",
        str(checkpoint),
        "--gen-subset",
        "valid",
        "--beam",
        "2",
        *extra,
    ]


def _with_nan(source: Path, path: Path) -> Path:
    state = load_checkpoint(str(source))
    state["model"]["encoder.layers.0.fc1.weight"][3, 5] = float("nan")
    torch.save(state, path)
    return path


def _nan_weight_to_score_reference(paths: Paths) -> Command:
    return _generate(paths, _with_nan(paths.checkpoint, paths.case / "diverged.pt"), "--score-reference")


def _reversed_direction(paths: Paths) -> Command:
    return _generate(paths, paths.checkpoint, "-s", "tgt", "-t", "src")


def _directory_as_path(paths: Paths) -> Command:
    return _generate(paths, paths.checkpoint.parent)


def _interactive(checkpoint: str, data: Path = FIXTURES, *extra: str) -> Command:
    """fairseq-interactive on a fixture checkpoint (tests/fixtures holds its dictionaries)."""
    return "fairseq-interactive", [
        str(data),
        "--user-dir",
        "user_dir",
        "--path",
        str(FIXTURES / "checkpoints" / checkpoint),
        "-s",
        "src",
        "-t",
        "tgt",
        *extra,
    ]


def _learned_gates_override(paths: Paths) -> Command:
    return _interactive("rk4.pt", FIXTURES, "--model-overrides", "{'ode_coefficients': 'learned'}")


def _stage_count_override(paths: Paths) -> Command:
    return _interactive("rk2_free.pt", FIXTURES, "--model-overrides", "{'encoder_ode_method': 'iie3'}")


def _misspelt_override(paths: Paths) -> Command:
    return _interactive("rk4.pt", FIXTURES, "--model-overrides", "{'encoder_ode_step': 8}")


def _other_dictionary(paths: Paths) -> Command:
    for side in ("src", "tgt"):
        text = (FIXTURES / f"dict.{side}.txt").read_text()
        (paths.case / f"dict.{side}.txt").write_text(text + "extra1 1\nextra2 1\nextra3 1\n")
    return _interactive("rk4.pt", paths.case)


def _average(*args: object) -> Command:
    return "python", ["-m", "ode_seq.cli.average", *map(str, args)]


def _average_other_architectures(paths: Paths) -> Command:
    ckpts = FIXTURES / "checkpoints"
    return _average("--inputs", ckpts / "rk4.pt", ckpts / "euler.pt", "--output", paths.case / "averaged.pt")


def _average_other_shapes(paths: Paths) -> Command:
    state = load_checkpoint(str(paths.checkpoint))
    state["model"]["encoder.layers.1.fc1.weight"] = torch.zeros(3, 32)
    torch.save(state, paths.case / "reshaped.pt")
    return _average("--inputs", paths.checkpoint, paths.case / "reshaped.pt", "--output", paths.case / "averaged.pt")


def _average_into_directory(paths: Paths) -> Command:
    (paths.case / "averaged").mkdir()
    return _average("--inputs", paths.checkpoint, paths.checkpoint, "--output", paths.case / "averaged")


def _average_over_an_input(paths: Paths) -> Command:
    shutil.copy(paths.checkpoint, paths.case / "a.pt")
    shutil.copy(paths.checkpoint, paths.case / "b.pt")
    return _average("--inputs", paths.case / "a.pt", paths.case / "b.pt", "--output", paths.case / "a.pt")


def _average_nan(paths: Paths) -> Command:
    nan = _with_nan(paths.checkpoint, paths.case / "diverged.pt")
    return _average("--inputs", paths.checkpoint, nan, "--output", paths.case / "averaged.pt")


def _average_zero_checkpoints(paths: Paths) -> Command:
    return _average(
        "--inputs", paths.checkpoint.parent, "--num-update-checkpoints", "0", "--output", paths.case / "averaged.pt"
    )


def _analyze_into_a_file(paths: Paths) -> Command:
    (paths.case / "notes.txt").write_text("not a directory\n")
    return "python", [
        "-m",
        "ode_seq.cli.analyze",
        "--path",
        str(paths.checkpoint),
        "--data",
        str(paths.data_bin),
        "--out",
        str(paths.case / "notes.txt" / "report"),
    ]


def _export(paths: Paths, *extra: str) -> Command:
    return "python", ["-m", "ode_seq.cli.export", "--path", str(FIXTURES / "checkpoints" / "nonauto.pt"), *extra]


def _export_zero_steps(paths: Paths) -> Command:
    return _export(paths, "--encoder-steps", "0", "--output", str(paths.case / "plain.pt"))


def _export_into_missing_directory(paths: Paths) -> Command:
    return _export(paths, "--output", str(paths.case / "exports" / "plain.pt"))


def _empty_m2(paths: Paths) -> Command:
    (paths.case / "hyp.txt").write_text("")
    (paths.case / "gold.m2").write_text("")
    return "python", ["-m", "ode_seq.metrics.m2", str(paths.case / "hyp.txt"), str(paths.case / "gold.m2")]


def _metric_json_under_a_file(metric: str, *extra: str) -> Callable[[Paths], Command]:
    def setup(paths: Paths) -> Command:
        for name in ("hyp.txt", "ref.txt"):
            (paths.case / name).write_text("a small test .\n")
        (paths.case / "notes.txt").write_text("not a directory\n")
        return "python", [
            "-m",
            f"ode_seq.metrics.{metric}",
            "--hyp",
            str(paths.case / "hyp.txt"),
            "--ref",
            str(paths.case / "ref.txt"),
            *extra,
            "--json",
            str(paths.case / "notes.txt" / "scores.json"),
        ]

    return setup


PREPROCESS_OUTPUTS = ("out/dict.src.txt", "out/train.src-tgt.src.bin", "out/train.src-tgt.tgt.bin")
RUN_CHECKPOINTS = ("ckpt/checkpoint_last.pt", "ckpt/checkpoint_best.pt")

CASES: Dict[str, BadInput] = {
    "learned gates with single-stage methods": BadInput(
        _learned_gates_on_euler,
        r"--ode-coefficients learned .*one stage",
        r"choose a method such as heun or rk4",
        outputs=("ckpt/checkpoint_last.pt",),
    ),
    "unknown ODE method": BadInput(
        _unknown_method,
        r"--encoder-ode-method: invalid choice: 'rk9'",
        r"choose from 'euler'",
        outputs=("ckpt/checkpoint_last.pt",),
    ),
    "data directory without a dictionary": BadInput(
        _missing_dictionary, r"dict\.tgt\.txt", r"fairseq-preprocess", outputs=("ckpt/checkpoint_last.pt",)
    ),
    "data directory without the train split": BadInput(
        _missing_split, r"Dataset not found: train", r"fairseq-preprocess", outputs=("ckpt/checkpoint_last.pt",)
    ),
    "parallel files with different line counts": BadInput(
        _unequal_line_counts,
        r"train\.src.*50.*train\.tgt.*49|train\.tgt.*49.*train\.src.*50",
        r"line-aligned|same number of lines",
        outputs=PREPROCESS_OUTPUTS,
        exit_xfail="fairseq_cli.preprocess binarises each side separately and never compares "
        "line counts: it exits 0 and writes both",
        message_xfail="no check exists",
    ),
    "binarised split with different source and target sizes": BadInput(
        _unequal_binarised_sizes,
        r"train.*20.*400|train.*400.*20",
        r"fairseq-preprocess",
        outputs=("ckpt/checkpoint_last.pt",),
        message_xfail="fairseq.data.LanguagePairDataset asserts 'Source and target must contain "
        "the same number of examples' without the split, the sizes or the fix",
    ),
    "non-UTF-8 line": BadInput(
        _non_utf8,
        r"train\.src.*line 7.*UTF-8|UTF-8.*train\.src.*line 7",
        r"re-encode|iconv",
        outputs=PREPROCESS_OUTPUTS,
        message_xfail="fairseq.file_chunker_utils._safe_readline seeks back over the bad byte "
        "and fails with 'negative seek position -1'",
    ),
    "empty and whitespace-only lines": BadInput(
        _empty_lines,
        r"train\.src.*line 4",
        r"remove|clean",
        outputs=PREPROCESS_OUTPUTS,
        exit_xfail="fairseq_cli.preprocess binarises empty lines as EOS-only sentences and exits 0",
        message_xfail="no check exists",
    ),
    "truncated checkpoint_last.pt at restart": BadInput(
        _truncated_checkpoint_last,
        r"checkpoint_last\.pt.*(truncated|corrupt)",
        r"--restore-file",
        outputs=("ckpt/checkpoint_1_5.pt",),
    ),
    "truncated checkpoint to average": BadInput(
        _truncated_to_average,
        r"truncated\.pt.*(truncated|corrupt)",
        r"re-?save|another checkpoint|--inputs",
        outputs=("averaged.pt",),
    ),
    "over-long sentence in validation without --skip-invalid-size-inputs-valid-test": BadInput(
        _over_long_validation,
        r"Size of sample #2 is invalid",
        r"skip this example with --skip-invalid-size-inputs-valid-test",
        outputs=("ckpt/checkpoint_last.pt",),
    ),
    "corrupted checkpoint to generate": BadInput(
        _corrupted_to_generate,
        r"corrupted\.pt.*(corrupt|CRC)",
        r"another checkpoint|re-?copy",
        outputs=("generated/generate-valid.txt",),
        exit_xfail="fairseq_cli.generate.main opens generate-valid.txt before loading the model, "
        "so the refused checkpoint leaves an empty output file",
    ),
    "--restore-file that does not exist beside a run": BadInput(
        _missing_restore_file,
        r"--restore-file \S*chekpoint_last\.pt does not exist",
        r"Name an existing checkpoint.*to start a new run on purpose, leave out --restore-file",
        kept=RUN_CHECKPOINTS,
    ),
    "directory given to --restore-file": BadInput(
        _directory_as_restore_file,
        r"--restore-file \S*ckpt is a directory",
        r"name a checkpoint file, e\.g\. \S*ckpt/checkpoint_last\.pt",
        kept=RUN_CHECKPOINTS,
    ),
    "save directory with checkpoints but no checkpoint_last.pt": BadInput(
        _run_without_checkpoint_last,
        r"holds checkpoints \(checkpoint1\.pt, checkpoint_best\.pt\) but no checkpoint_last\.pt",
        r"pass --restore-file \S*ckpt/checkpoint1\.pt; to start a new run on purpose",
        kept=("ckpt/checkpoint1.pt", "ckpt/checkpoint_best.pt"),
    ),
    "--continue-once that does not exist": BadInput(
        _missing_continue_once,
        r"--continue-once \S*gone\.pt does not exist",
        r"Name an existing checkpoint",
        kept=("ckpt/checkpoint_best.pt",),
    ),
    "adaptive tolerances too tight for float32": BadInput(
        _tight_tolerances,
        r"encoder block 0: dopri5 with rtol 1e-12, atol 1e-12 \(torch\.float32\) stopped at t = .* "
        r"after 1000 field evaluations: the limit of 1000 per solve",
        r"loosen them \(--ode-rtol, --ode-atol.*--ode-max-evaluations",
        outputs=("ckpt/checkpoint_*.pt",),
    ),
    "NaN weight with --score-reference": BadInput(
        _nan_weight_to_score_reference,
        r"diverged\.pt holds non-finite parameters: 1 of 2048 values of encoder\.layers\.0\.fc1\.weight",
        r"use an earlier checkpoint",
    ),
    "-s tgt -t src with a src-to-tgt checkpoint": BadInput(
        _reversed_direction,
        r"trained to translate src -> tgt, but this run reads tgt as the source",
        r"pass -s src -t tgt",
    ),
    "directory given as --path": BadInput(
        _directory_as_path,
        r"\S+ is a directory, not a checkpoint file",
        r"name a file in it, e\.g\. \S+checkpoint_best\.pt",
    ),
    "--model-overrides adding learned gates to a fixed checkpoint": BadInput(
        _learned_gates_override,
        r"do not fit the model built from its options and any --model-overrides: 4 parameters missing "
        r"from the checkpoint \(encoder\.layers\.0\.combiner\.proj\.weight and 3 more\)",
        r"fairseq-train --finetune-from-model CHECKPOINT",
    ),
    "--model-overrides another stage count for per-stage output weights": BadInput(
        _stage_count_override,
        r"output weights \(encoder\.layers\.0\.combiner\.w, shape \(2,\)\) were trained for another number "
        r"of stages",
        r"keep the trained method, or train with --ode-coefficients fixed or ema",
    ),
    "--model-overrides with a misspelt option": BadInput(
        _misspelt_override,
        r"encoder_ode_step is not an option of this model, so it would be ignored",
        r"did you mean encoder_ode_steps\? \(check the keys of --model-overrides\)",
    ),
    "data directory with another dictionary than the model's": BadInput(
        _other_dictionary,
        r"source dictionary has 27 symbols but the checkpoint's encoder\.embed_tokens\.weight has 24 rows",
        r"with the data directory \(dict\.\*\.txt\) it was trained with",
    ),
    "checkpoints of different architectures to average": BadInput(
        _average_other_architectures,
        r"euler\.pt was trained as --arch ode_transformer_euler, \S*rk4\.pt as --arch ode_transformer_rk4",
        r"average checkpoints of one run",
        outputs=("averaged.pt*",),
    ),
    "checkpoints with parameters of different shapes to average": BadInput(
        _average_other_shapes,
        r"parameter encoder\.layers\.1\.fc1\.weight has shape \(3, 32\) in \S*reshaped\.pt but \(64, 32\)",
        r"average checkpoints of one run",
        outputs=("averaged.pt*",),
    ),
    "directory given to average --output": BadInput(
        _average_into_directory,
        r"--output \S*averaged is a directory",
        r"name the file to write",
        outputs=("averaged.tmp*", "averaged/*"),
    ),
    "average --output naming one of its inputs": BadInput(
        _average_over_an_input,
        r"--output \S*a\.pt is one of the checkpoints to average",
        r"write the average to another file",
        kept=("a.pt",),
        outputs=("a.pt.tmp*",),
    ),
    "NaN weight to average": BadInput(
        _average_nan,
        r"diverged\.pt holds non-finite parameters",
        r"use an earlier checkpoint",
        outputs=("averaged.pt*",),
    ),
    "average of zero checkpoints": BadInput(
        _average_zero_checkpoints,
        r"--num-update-checkpoints must be a positive number of checkpoints, got 0",
        r"a positive number of checkpoints",
        outputs=("averaged.pt*",),
    ),
    "analysis report under a regular file": BadInput(
        _analyze_into_a_file,
        r"--out \S*notes\.txt/report: \S*notes\.txt is a file, not a directory",
        r"choose another path",
    ),
    "export with zero encoder steps": BadInput(
        _export_zero_steps,
        r"--encoder-steps must be a positive number of steps \(layers\), got 0",
        r"a positive number of steps",
        outputs=("plain.pt*",),
    ),
    "export into a missing directory": BadInput(
        _export_into_missing_directory,
        r"--output \S*exports/plain\.pt: its directory \S*exports does not exist",
        r"create it first \(mkdir -p\)",
    ),
    "empty hypotheses scored against an empty M2 file": BadInput(
        _empty_m2, r"gold\.m2 holds no M2 sentences", r"check that the gold file is the right one"
    ),
    "BLEU --json under a regular file": BadInput(
        _metric_json_under_a_file("bleu", "--lang", "en"),
        r"--json \S*notes\.txt/scores\.json: \S*notes\.txt is a file, not a directory",
        r"choose another path",
    ),
    "ROUGE --json under a regular file": BadInput(
        _metric_json_under_a_file("rouge", "--bootstrap-samples", "10"),
        r"--json \S*notes\.txt/scores\.json: its directory \S*notes\.txt does not exist or is not a directory",
        r"choose another path",
    ),
}


def _case(name: str, check: str) -> object:
    reason = CASES[name].exit_xfail if check == "exit" else CASES[name].message_xfail
    marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
    return pytest.param(name, marks=marks, id=name.replace(" ", "-"))


@pytest.fixture(scope="module")
def over_long_data(data_bin, tmp_path_factory) -> Path:
    raw = tmp_path_factory.mktemp("over_long")
    _preprocess_with_over_long_sentence(raw, raw / "bin", data_bin)
    return raw / "bin"


@pytest.fixture(scope="module")
def outcome(data_bin, over_long_data, reference_run, tmp_path_factory):
    """Run each case once: name -> (completed process, case directory). The first case of each
    tool runs its console script as a subprocess; the others call its entry point in this process
    (the same code, without the seconds of start-up a subprocess costs)."""
    results: Dict[str, Tuple[subprocess.CompletedProcess, Path]] = {}
    tools_run_as_subprocess = set()

    def get(name: str):
        if name not in results:
            case = tmp_path_factory.mktemp(re.sub(r"\W+", "_", name)[:40])
            paths = Paths(case, data_bin, over_long_data, reference_run[0] / "checkpoint_last.pt")
            tool, args = CASES[name].setup(paths)
            kept = {path: (case / path).read_bytes() for path in CASES[name].kept}
            program = (tool, args[1]) if tool == "python" else (tool,)
            if program in tools_run_as_subprocess:
                result = run_in_process(tool, args)
            else:
                tools_run_as_subprocess.add(program)
                result = run(tool, args, check=False, timeout=900)
            results[name] = (result, case, kept)
        return results[name]

    return get


@pytest.mark.parametrize("name", [_case(n, "exit") for n in CASES])
def test_bad_input_exits_non_zero_without_writing_output(name, outcome):
    result, case, kept = outcome(name)
    assert result.returncode != 0, result.stdout[-2000:]
    assert [p for p in CASES[name].outputs if list(case.glob(p))] == []
    assert [p for p, data in kept.items() if (case / p).read_bytes() != data] == []


@pytest.mark.parametrize("name", [_case(n, "message") for n in CASES])
def test_bad_input_error_names_the_problem_and_the_fix(name, outcome):
    result, _, _ = outcome(name)
    error = final_error(result.stderr)
    assert re.search(CASES[name].problem, error, re.S), error
    assert re.search(CASES[name].fix, error, re.S), error


def test_checkpoints_record_the_language_pair_they_were_trained_for(reference_run):
    """What lets fairseq-generate refuse ``-s tgt -t src`` even without the training data."""
    state = load_checkpoint(str(reference_run[0] / "checkpoint_last.pt"))
    assert state["task_state"]["language_pair"] == ["src", "tgt"]


@pytest.fixture(scope="module")
def over_long(over_long_data, tmp_path_factory):
    """The over-long corpus and a model trained on it with the flag on: (data, save dir, log)."""
    save = tmp_path_factory.mktemp("over_long_model")
    log = run(
        "fairseq-train", _train(over_long_data, save, *MAX_POSITIONS, "--skip-invalid-size-inputs-valid-test")
    ).stdout
    return over_long_data, save, log


def test_training_skips_over_long_sentences_with_a_warning(over_long):
    _, _, log = over_long
    assert (
        f"1 samples have invalid sizes and will be skipped, max_positions=(16, 16), "
        f"first few sample ids=[{LONG_AT['train']}]"
    ) in log


def test_skip_invalid_size_inputs_valid_test_skips_the_over_long_validation_sentence(over_long):
    _, save, log = over_long
    assert (
        f"1 samples have invalid sizes and will be skipped, max_positions=(16, 16), "
        f"first few sample ids=[{LONG_AT['valid']}]"
    ) in log
    assert "valid on 'valid' subset" in log
    assert (save / "checkpoint_last.pt").exists()


def test_generate_with_skip_invalid_size_inputs_valid_test_translates_every_other_sentence(over_long):
    data, save, _ = over_long
    out = run(
        "fairseq-generate",
        [
            str(data),
            "--user-dir",
            "user_dir",
            "--path",
            str(save / "checkpoint_last.pt"),
            "--gen-subset",
            "test",
            "--skip-invalid-size-inputs-valid-test",
            "--beam",
            "2",
        ],
    )
    translated = {int(i) for i in re.findall(r"^H-(\d+)\t", out.stdout, re.M)}
    assert translated == set(range(10)) - {LONG_AT["test"]}


def _refusal(data_bin: Path, arch: str, options_: Sequence[str], capsys) -> str:
    """The message with which fairseq-train's parser or model builder refuses ``options_``."""
    args = [str(data_bin), "--user-dir", "user_dir", "--arch", arch, *TINY_MODEL, *options_]
    try:
        cfg = parse_training_args(args)
        tasks.setup_task(cfg.task).build_model(cfg.model)
    except SystemExit as exit_:
        assert exit_.code == 2
        return capsys.readouterr().err
    except ValueError as error:
        return str(error)
    raise AssertionError(f"{arch} accepted {options_}")


def _adaptive(*options: str) -> Tuple[str, List[str]]:
    """(arch, options) of the dopri5 encoder at the tiny model's depth, plus ``options``."""
    return DOPRI5[1], [*DOPRI5[2:], *options]


# Invalid option values and combinations, per model family: (arch, options, problem, fix).
OPTION_ERRORS = {
    "ode: adaptive decoder": (
        "ode_transformer_rk4_small",
        ["--decoder-ode-method", "dopri5"],
        r"--decoder-ode-method: invalid choice: 'dopri5'",
        r"choose from 'euler'",
    ),
    "ode: unknown field": (
        "ode_transformer_rk4_small",
        ["--ode-field", "bogus"],
        r"--ode-field: invalid choice",
        r"choose from 'residual-branch'",
    ),
    "ode: learned gates on euler": (
        "ode_transformer_rk4_small",
        ["--ode-coefficients", "learned", "--encoder-ode-method", "euler"],
        r"--ode-coefficients learned .*one stage",
        r"choose a method such as heun or rk4",
    ),
    "ode: share group not dividing layers": (
        "ode_transformer_rk4_small",
        ["--encoder-share-group-size", "3"],
        r"--encoder-share-group-size 3",
        r"must be a positive divisor of --encoder-layers 2",
    ),
    "ode: both checkpointing options": (
        "ode_transformer_rk4_small",
        ["--ode-checkpoint-stages", "--checkpoint-activations"],
        r"both checkpoint ODE blocks",
        r"pass --checkpoint-activations .* or --ode-checkpoint-stages",
    ),
    "ode: negative relative positions": (
        "ode_transformer_rk4_small",
        ["--encoder-relative-positions", "-1"],
        r"--encoder-relative-positions must be >= 0",
        r"0 disables relative positions",
    ),
    "non-autonomous: unknown weights": (
        "ode_transformer_nonauto_small",
        ["--time-weights", "bogus"],
        r"--time-weights: invalid choice: 'bogus'",
        r"choose from 'paper', 'low-rank'",
    ),
    "non-autonomous: zero rank": (
        "ode_transformer_nonauto_small",
        ["--time-rank", "0"],
        r"--time-rank",
        r"must be positive",
    ),
    "non-autonomous: adaptive method": (
        "ode_transformer_nonauto_small",
        ["--encoder-ode-method", "dopri5"],
        r"non-autonomous stacks use fixed grids",
        r"choose e\.g\. euler or rk4",
    ),
    "stable: unknown attention kernel": (
        "stable_ode_transformer_small",
        ["--attention-kernel", "cosine"],
        r"--attention-kernel: invalid choice: 'cosine'",
        r"choose from 'dot', 'l2'",
    ),
    "ode: non-finite tolerance": (
        *_adaptive("--ode-rtol", "nan"),
        r"--ode-rtol nan is not a finite number",
        r"must be finite and > 0 \(e\.g\. --ode-rtol 1e-3",
    ),
    "ode: infinite tolerance": (
        *_adaptive("--ode-atol", "inf"),
        r"--ode-atol inf is not a finite number",
        r"must be finite and > 0",
    ),
    "ode: non-finite minimum step": (
        *_adaptive("--ode-min-step", "nan"),
        r"--ode-min-step nan is not a finite number",
        r"minimum step finite and >= 0",
    ),
    "ode: minimum step as long as the interval": (
        *_adaptive("--ode-min-step", "2"),
        r"--ode-min-step 2\.0 is not shorter than the interval \[0, 2\]",
        r"pass a smaller --ode-min-step",
    ),
    "ode: no field evaluations allowed": (
        *_adaptive("--ode-max-evaluations", "0"),
        r"--ode-max-evaluations must be a positive number of field evaluations per solve, got 0",
        r"default 1000",
    ),
    "stable: relative positions": (
        "stable_ode_transformer_small",
        ["--encoder-relative-positions", "8"],
        r"stable ODE blocks have no relative position keys",
        r"pass --encoder-relative-positions 0 --decoder-relative-positions 0",
    ),
    "layer kind: unknown": (
        "ode_transformer_rk4_small",
        ["--layer-kind", "bogus"],
        r"--layer-kind: invalid choice: 'bogus'",
        r"choose from 'standard', 'stable', 'time-dependent'",
    ),
    "layer kind: another kind's option": (
        "ode_transformer_rk4_small",
        ["--time-rank", "3"],
        r"--time-rank 3 is an option of the time-dependent layer kind, but the model's layers are of kind standard",
        r"pass --layer-kind time-dependent \(or an --arch of that kind\), or leave --time-rank out",
    ),
    "layer kind: another kind's flag": (
        "ode_transformer_nonauto_small",
        ["--spectral-norm-constraint"],
        r"--spectral-norm-constraint is an option of the stable layer kind, .* of kind time-dependent",
        r"pass --layer-kind stable",
    ),
    "layer kind: a teacher's interface without the stable kind": (
        "ode_transformer_rk4_small",
        ["--init-from-teacher", "teacher.pt"],
        r"--init-from-teacher teacher\.pt is an option of the stable layer kind",
        r"pass --layer-kind stable",
    ),
}


@pytest.mark.parametrize("case", list(OPTION_ERRORS))
def test_invalid_model_option_is_refused_naming_the_option_and_the_fix(case, data_bin, capsys):
    arch, options_, problem, fix = OPTION_ERRORS[case]
    message = _refusal(data_bin, arch, options_, capsys)
    assert re.search(problem, message) and re.search(fix, message), message
