"""The studies' run records (examples/lib.sh, "Run records") and their command lines.

A record carries MANIFEST.sha256, written into it before it is published; a study reads a record
only when its files are exactly the manifest's, byte for byte, and otherwise stops naming the
record and the cell to rerun, before anything of it is used or anything is trained. Records made
before manifests are sealed once by examples/seal_records.sh, which checks that each file
decompresses in full. `--run` is checked before anything starts.

The records here are made by lib.sh's own record_run from hand-written run files (no training):
study.sh and quality_study.sh then run one cell (`--run`) against them.
"""

from __future__ import annotations

import gzip
import hashlib
import shutil
import subprocess
from pathlib import Path
from typing import Callable, Dict

import pytest

from tests.reliability.process_tree import pipeline_env

REPO_ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = REPO_ROOT / "examples"
LM_STUDY = EXAMPLES / "language_modeling" / "study.sh"
QUALITY_STUDY = EXAMPLES / "translation" / "quality_study.sh"
SEAL = EXAMPLES / "seal_records.sh"
LM_CELL = ("residual 2 8e-3", "grid/residual/lr8e-3/seed2")
QUALITY_CELL = ("residual_6_6 1 4e-3 300 all", "grid/residual_6_6/lr4e-3-warmup300/seed1")
# What each study's record of a finished run holds, as its run_one writes it; data-id.txt comes
# from the study's own data_id.
LM_RUN = {
    "recipe.txt": "max_epoch=40 patience=5 adaptive=2000,5000 lr=8e-3 seed=2 extra=\n",
    "train.log": "".join(f"epoch {e:03d} | valid on 'valid' subset | loss 5.{e:02d}\n" for e in range(1, 40)),
    "eval-test/scores.txt": "".join(f"{token}\t-{token % 7}.25\n" for token in range(2000)),
    "eval-test/verse-scores.txt": "".join(f"{verse}\t-{verse}.5\n" for verse in range(20)),
}
LM_DATA = ("data-bin/dict.txt", "data-bin/train.bin", "data-bin/train.idx", "data-bin/test.bin", "data-bin/test.idx")
QUALITY_RUN = {
    "run-config.txt": "max_update=800 max_tokens=2048 lr=4e-3 warmup=300 embed_dim=128",
    "train.log": "".join(f"epoch 001 | num_updates {u} | loss 9.{u:03d}\n" for u in range(1, 800, 50)),
    "eval-test/scores.json": '{"sacrebleu": {"13a": {"score": 3.5}}}\n',
    "eval-test/generate-test.txt": "".join(f"H-{i}\t-1.5\tY dijo {i} .\n" for i in range(300)),
}
QUALITY_DATA = (
    "data-bin/dict.en.txt", "data-bin/dict.es.txt", "data-bin/train.en-es.en.idx", "data-bin/train.en-es.es.idx",
    "raw/test.es",
)  # fmt: skip


def run(*command: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(command, capture_output=True, text=True, env=pipeline_env(), cwd=cwd, timeout=120)


def make_record(tmp_path: Path, run_files: Dict[str, str], data_files: tuple, cell: str) -> Path:
    """A study's work dir (its data files) and a record of ``cell`` made by lib.sh's record_run."""
    finished = tmp_path / "finished"
    for name, text in run_files.items():
        (finished / name).parent.mkdir(parents=True, exist_ok=True)
        (finished / name).write_text(text)
    for name in data_files:
        (tmp_path / "work" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "work" / name).write_text(f"the bytes of {name}\n")
    script = (
        f'source "{EXAMPLES}/lib.sh"; content_id {" ".join("work/" + name for name in data_files)}'
        f" > finished/data-id.txt; record_run finished records/{cell} data-id.txt {' '.join(run_files)}"
    )
    result = run("bash", "-c", script, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    return tmp_path / "records" / cell


def study(tmp_path: Path, script: Path, *args: str) -> subprocess.CompletedProcess:
    return run(str(script), "--work-dir", "work", "--gpus", "0", *args, cwd=tmp_path)


def study_run(tmp_path: Path, script: Path, cell: str) -> subprocess.CompletedProcess:
    return study(tmp_path, script, "--record-dir", "records", "--run", cell)


@pytest.fixture
def lm_record(tmp_path) -> Path:
    return make_record(tmp_path, LM_RUN, LM_DATA, LM_CELL[1])


def test_a_record_carries_a_manifest_of_every_file_that_sha256sum_checks(lm_record):
    manifest = (lm_record / "MANIFEST.sha256").read_text().splitlines()
    files = sorted(str(path.relative_to(lm_record)) for path in lm_record.rglob("*.gz"))
    assert [line.split("  ", 1)[1] for line in manifest] == files and len(files) == 5
    for line in manifest:
        digest, name = line.split("  ", 1)
        assert hashlib.sha256((lm_record / name).read_bytes()).hexdigest() == digest
    assert run("sha256sum", "--check", "--strict", "MANIFEST.sha256", cwd=lm_record).returncode == 0


def test_an_intact_record_is_reused_without_training(lm_record, tmp_path):
    result = study_run(tmp_path, LM_STUDY, LM_CELL[0])
    assert result.returncode == 0, result.stderr
    assert f"reused the record of residual seed 2 (lr 8e-3): records/{LM_CELL[1]}" in result.stderr
    restored = tmp_path / "work" / LM_CELL[1]
    assert (restored / "eval-test" / "scores.txt").read_text() == LM_RUN["eval-test/scores.txt"]
    assert not (restored / "train.stdout").exists() and not (restored / "MANIFEST.sha256").exists()


def cut_short(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def edited(path: Path) -> None:
    """The file as gzip -9n writes an edited copy: a complete gzip file of other text."""
    text = gzip.decompress(path.read_bytes()).replace(b"loss 5.3", b"loss 4.3")
    path.write_bytes(gzip.compress(text, mtime=0))


# damage: (what it does to the record, the problem the study names)
DAMAGES: Dict[str, tuple[Callable[[Path], None], str]] = {
    "scores cut short": (
        lambda r: cut_short(r / "eval-test/scores.txt.gz"),
        "eval-test/scores.txt.gz is not the file recorded (its sha256 is not the manifest's)",
    ),
    "training log cut short": (
        lambda r: cut_short(r / "train.log.gz"),
        "train.log.gz is not the file recorded (its sha256 is not the manifest's)",
    ),
    "training log edited": (
        lambda r: edited(r / "train.log.gz"),
        "train.log.gz is not the file recorded (its sha256 is not the manifest's)",
    ),
    "verse scores deleted": (
        lambda r: (r / "eval-test/verse-scores.txt.gz").unlink(),
        "verse-scores.txt.gz is missing",
    ),
    "a file added": (
        lambda r: (r / "checkpoint_best.pt.gz").write_bytes(gzip.compress(b"x")),
        "checkpoint_best.pt.gz is not in its MANIFEST.sha256",
    ),
    "manifest cut short": (lambda r: cut_short(r / "MANIFEST.sha256"), "is not in its MANIFEST.sha256"),
}


@pytest.mark.parametrize("damage", DAMAGES)
def test_a_damaged_record_stops_the_run_naming_it_and_the_cell_to_rerun(lm_record, tmp_path, damage):
    harm, problem = DAMAGES[damage]
    harm(lm_record)
    result = study_run(tmp_path, LM_STUDY, LM_CELL[0])
    assert result.returncode == 1
    assert f"study.sh: error: the record records/{LM_CELL[1]} cannot be read: " in result.stderr
    assert problem in result.stderr
    assert (
        f"; nothing of it was used. To go on, rerun that cell: rm -r records/{LM_CELL[1]} work/{LM_CELL[1]}, "
        "then the study's command"
    ) in result.stderr
    assert (
        "reused" not in result.stderr and not (tmp_path / "work" / LM_CELL[1]).exists()
    )  # nothing read, nothing trained


def test_a_record_without_manifest_is_refused_naming_the_seal_and_the_rerun(lm_record, tmp_path):
    (lm_record / "MANIFEST.sha256").unlink()
    result = study_run(tmp_path, LM_STUDY, LM_CELL[0])
    assert result.returncode == 1 and not (tmp_path / "work" / LM_CELL[1]).exists()
    assert (
        f"the record records/{LM_CELL[1]} cannot be read: it has no MANIFEST.sha256; nothing of it was used. To go "
        "on, if it was written before records carried a manifest and you trust it, seal it once: "
        f"examples/seal_records.sh --record-dir records/{LM_CELL[1]}"
    ) in result.stderr
    assert f"else rerun that cell: rm -r records/{LM_CELL[1]} work/{LM_CELL[1]}" in result.stderr


def test_a_damaged_unfinished_record_is_refused_before_its_training_resumes(tmp_path):
    kept = {name: LM_RUN[name] for name in ("recipe.txt", "train.log")}
    kept["checkpoint_last.pt"] = "the bytes of a checkpoint\n" * 2000
    record = make_record(tmp_path, kept, LM_DATA, "unfinished/residual/lr8e-3/seed2")
    shutil.move(tmp_path / "records" / "unfinished", tmp_path / "unfinished")  # kept outside the records
    cut_short(
        tmp_path / "unfinished" / record.relative_to(tmp_path / "records" / "unfinished") / "checkpoint_last.pt.gz"
    )
    result = study(tmp_path, LM_STUDY, "--record-dir", "records", "--unfinished-dir", "unfinished", "--run", LM_CELL[0])
    assert result.returncode == 1
    assert (
        "study.sh: error: the record unfinished/residual/lr8e-3/seed2 cannot be read: checkpoint_last.pt.gz "
        f"is not the file recorded (its sha256 is not the manifest's); nothing of it was used. To go on, rerun that "
        f"cell: rm -r unfinished/residual/lr8e-3/seed2 work/{LM_CELL[1]}"
    ) in result.stderr
    assert not (tmp_path / "work" / LM_CELL[1]).exists()


def test_the_quality_study_refuses_a_record_whose_translations_were_cut_short(tmp_path):
    record = make_record(tmp_path, QUALITY_RUN, QUALITY_DATA, QUALITY_CELL[1])
    intact = study_run(tmp_path, QUALITY_STUDY, QUALITY_CELL[0])
    assert intact.returncode == 0 and "reused the record of residual_6_6 seed 1" in intact.stderr, intact.stderr
    cut_short(record / "eval-test/generate-test.txt.gz")
    (tmp_path / "work" / "grid").rename(tmp_path / "first-grid")
    result = study_run(tmp_path, QUALITY_STUDY, QUALITY_CELL[0])
    assert result.returncode == 1
    assert (
        f"quality_study.sh: error: the record records/{QUALITY_CELL[1]} cannot be read: "
        "eval-test/generate-test.txt.gz is not the file recorded"
    ) in result.stderr
    assert not (tmp_path / "work" / QUALITY_CELL[1]).exists()


def test_seal_records_seals_a_record_made_before_manifests_and_the_study_reuses_it(lm_record, tmp_path):
    manifest = (lm_record / "MANIFEST.sha256").read_bytes()
    (lm_record / "MANIFEST.sha256").unlink()
    result = run(str(SEAL), "--record-dir", "records", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "1 records sealed, 0 sealed before and intact, 0 refused (under records)" in result.stderr
    assert (lm_record / "MANIFEST.sha256").read_bytes() == manifest  # what record_run writes
    again = run(str(SEAL), "--record-dir", "records", cwd=tmp_path)
    assert "0 records sealed, 1 sealed before and intact, 0 refused" in again.stderr
    assert study_run(tmp_path, LM_STUDY, LM_CELL[0]).returncode == 0


@pytest.mark.parametrize(
    "damage, problem",
    [
        (
            lambda r: cut_short(r / "eval-test/scores.txt.gz"),
            "eval-test/scores.txt.gz does not decompress in full (gzip: records/grid/residual/lr8e-3/seed2/eval-test/"
            "scores.txt.gz: unexpected end of file)",
        ),
        (lambda r: (r / "eval-test/verse-scores.txt.gz").unlink(), "eval-test/verse-scores.txt.gz is missing"),
        (lambda r: (r / "train.log.gz").write_bytes(gzip.compress(b"")), "train.log.gz is empty"),
    ],
    ids=["scores cut short", "verse scores missing", "empty training log"],
)
def test_seal_records_refuses_a_damaged_record_and_writes_nothing_into_it(lm_record, tmp_path, damage, problem):
    (lm_record / "MANIFEST.sha256").unlink()
    damage(lm_record)
    result = run(str(SEAL), "--record-dir", "records", cwd=tmp_path)
    assert result.returncode == 1
    assert (
        f"seal_records.sh: error: the record records/{LM_CELL[1]} cannot be sealed: {problem}. Rerun that cell: "
        f"rm -r records/{LM_CELL[1]} and the run's directory in the study's work dir, then the study's command"
    ) in result.stderr
    assert not (lm_record / "MANIFEST.sha256").exists()


def test_the_committed_records_are_sealed_and_intact():
    script = (
        f'source "{EXAMPLES}/lib.sh"; for record in results/lm-study/*/*/*/seed* results/quality-study/grid/*/*/seed*;'
        ' do echo "$record: $(record_damage "$record")"; done'
    )
    result = run("bash", "-c", script, cwd=REPO_ROOT)
    lines = result.stdout.splitlines()
    assert result.returncode == 0 and result.stderr == ""
    assert lines and all(line.endswith(": ") for line in lines), result.stdout


@pytest.mark.parametrize(
    "script, cell, message",
    [
        (LM_STUDY, "pcformr 2 8e-3", "--run's CONFIG must be one of iiet, "),
        (LM_STUDY, "rk4 2", "--run takes \"CONFIG SEED LR [tune]\", got 'rk4 2', without LR"),
        (LM_STUDY, "rk4 0 8e-3", "--run's SEED must be a positive whole number, got '0'"),
        (LM_STUDY, "rk4 2 8e3x", "--run's LR must be a non-negative number such as 2e-3, got '8e3x'"),
        (LM_STUDY, "rk4 2 8e-3 tuning", "its last word can only be tune, got 'rk4 2 8e-3 tuning'"),
        (QUALITY_STUDY, "residual_6_6 1 4e-3 300", "without STAGES"),
        (QUALITY_STUDY, "residual 1 4e-3 300 all", "--run's CONFIG must be one of iiet_6_6, "),
        (QUALITY_STUDY, "residual_6_6 1 4e-3 300 everything", "--run's STAGES must be all or train, got everything"),
    ],
    ids=[
        "lm-typo",
        "lm-no-lr",
        "lm-seed-0",
        "lm-lr",
        "lm-tune",
        "quality-no-stages",
        "quality-config",
        "quality-stages",
    ],
)
def test_a_bad_run_is_a_usage_error_before_anything_starts(tmp_path, script, cell, message):
    result = study_run(tmp_path, script, cell)
    assert result.returncode == 2 and result.stdout == ""
    assert f"{script.name}: error: " in result.stderr and message in result.stderr
    assert not (tmp_path / "work").exists()


MODES = "--run, --keep-unfinished and --speed-check each do something other than the study: give one"


@pytest.mark.parametrize(
    "script, args, message",
    [
        (LM_STUDY, ["--run", "rk4 2 8e-3", "--record-dir", "records", "--keep-unfinished"], MODES),
        (LM_STUDY, ["--keep-unfinished", "--record-dir", "records", "--speed-check", "3"], MODES),
        (LM_STUDY, ["--record-dir", "a-file/records", "--run", "rk4 2 8e-3"], "--record-dir a-file/records cannot"),
        (
            QUALITY_STUDY,
            ["--record-dir", "a-file", "--run", "residual_6_6 1 4e-3 300 all"],
            "--record-dir a-file cannot",
        ),
    ],
    ids=[
        "lm-run-and-keep-unfinished",
        "lm-keep-unfinished-and-speed-check",
        "lm-record-dir-file",
        "quality-record-dir-file",
    ],
)
def test_options_that_cannot_go_together_are_a_usage_error_before_anything_starts(tmp_path, script, args, message):
    (tmp_path / "a-file").write_text("not a directory\n")
    result = study(tmp_path, script, *args)
    assert result.returncode == 2 and result.stdout == ""
    assert f"{script.name}: error: {message}" in result.stderr
    assert not (tmp_path / "work").exists() and not (tmp_path / "records").exists()
