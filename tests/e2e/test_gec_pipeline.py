"""The GEC recipe end to end on a slice of the real UA-GEC corpus, through the real scripts:
ua-gec -> gold M2 -> prepare.sh (parallel text, BPE, joined-dictionary binarisation) -> train.sh
(a tiny model, a few updates) -> evaluate.sh (beam search, BPE removed, our M2 scorer)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("ua_gec")

from ode_seq.metrics.m2 import M2Scorer, read_hypotheses  # noqa: E402
from ode_seq.metrics.m2_format import read_m2  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
GEC = REPO / "examples" / "gec"
ARCH = os.environ.get("GEC_TEST_ARCH", "ode_transformer_rk4_small")
TINY_MODEL = (
    "--encoder-layers 1 --decoder-layers 1 --encoder-embed-dim 32 --decoder-embed-dim 32 "
    "--encoder-ffn-embed-dim 64 --decoder-ffn-embed-dim 64 --encoder-attention-heads 2 "
    "--decoder-attention-heads 2 --warmup-updates 2 --lr 0.01 --no-epoch-checkpoints"
).split()
TEST_SENTENCES = 16


def run(command):
    env = dict(os.environ)
    env.setdefault("OMP_NUM_THREADS", "1")  # a tiny model gains nothing from more threads
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    return subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True)


def m2_lines(counts):
    return [
        f"Precision   : {counts.precision:.4f}",
        f"Recall      : {counts.recall:.4f}",
        f"F_0.5       : {counts.f_score(0.5):.4f}",
    ]


@pytest.fixture(scope="module")
def raw(tmp_path_factory):
    """Gold M2 of 200 short training sentences and 16 short test sentences (two annotators)."""
    folder = tmp_path_factory.mktemp("gec") / "raw"
    for partition, count in (("train", 200), ("test", TEST_SENTENCES)):
        result = run(
            [
                sys.executable,
                str(GEC / "ua_gec_to_m2.py"),
                "--partition",
                partition,
                "--out",
                str(folder / f"{partition}.m2"),
                "--max-sentences",
                str(count),
                "--max-tokens",
                "12",
            ]
        )
        assert result.returncode == 0, result.stderr
    return folder


def test_ua_gec_gold_corrections_score_f05_of_one_and_the_source_zero(raw):
    sentences = read_m2(str(raw / "test.m2"))
    assert len(sentences) == TEST_SENTENCES and {0, 1} <= {a for s in sentences for a in s.annotations}
    result = run(
        [
            sys.executable,
            str(GEC / "m2_to_parallel.py"),
            str(raw / "test.m2"),
            "--out-prefix",
            str(raw / "oracle"),
            "--annotator",
            "1",
        ]
    )
    assert result.returncode == 0, result.stderr
    oracle = M2Scorer(annotator=1).score(read_hypotheses(str(raw / "oracle.tgt")), sentences)
    assert oracle.correct == oracle.proposed == oracle.gold > 0
    source = M2Scorer().score(read_hypotheses(str(raw / "oracle.src")), sentences)
    assert (source.proposed, source.recall, source.f_score()) == (0, 0.0, 0.0)


def test_pipeline_trains_generates_and_scores_with_the_m2_scorer(raw, tmp_path):
    # A raw Lang-8 style corpus next to the M2 data: two corrections, a copy, an over-long pair.
    lang8 = {
        "src": ['He said, "We shouldn\'t go."', "She go home.", "All good.", "word " * 50],
        "tgt": ['He said, "We should not go."', "She goes home.", "All good.", "word " * 50],
    }
    for side, lines in lang8.items():
        (tmp_path / f"lang8.{side}").write_text("\n".join(lines) + "\n", encoding="utf-8")
    work = tmp_path / "work"
    data = [
        "--work-dir",
        str(work),
        "--raw-dir",
        str(raw),
        "--train-m2",
        str(raw / "train.m2"),
        "--train-parallel",
        str(tmp_path / "lang8"),
        "--parallel-tokenize",
        "nltk",
        "--drop-copies",
        "--max-len",
        "40",
        "--valid-m2",
        str(raw / "test.m2"),
        "--test-m2",
        str(raw / "test.m2"),
        "--bpe-merges",
        "200",
    ]
    prepared = run(["bash", str(GEC / "prepare.sh"), *data])
    assert prepared.returncode == 0, prepared.stderr[-3000:]
    corrected_m2_pairs = sum(1 for sentence in read_m2(str(raw / "train.m2")) if sentence.edits_of(0))
    train_sources = (work / "text" / "train.src").read_text(encoding="utf-8").splitlines()
    assert len(train_sources) == corrected_m2_pairs + 2
    assert train_sources[-2:] == ['He said , " We should n\'t go . "', "She go home ."]
    bin_dir = work / "data-bin"
    assert (bin_dir / "dict.src.txt").read_text() == (bin_dir / "dict.tgt.txt").read_text()
    assert len((work / "text" / "bpe" / "codes").read_text().splitlines()) == 201  # version + merges
    assert "@@ " in (work / "text" / "bpe" / "train.src").read_text(encoding="utf-8")

    again = run(["bash", str(GEC / "prepare.sh"), *data])
    assert again.returncode == 0 and f"skip binarisation: {bin_dir} exists" in again.stderr

    trained = run(
        [
            "bash",
            str(GEC / "train.sh"),
            "--work-dir",
            str(work),
            "--arch",
            ARCH,
            "--gpus",
            "0",
            "--max-update",
            "3",
            "--max-tokens",
            "1024",
            "--update-freq",
            "1",
            "--",
            *TINY_MODEL,
        ]
    )
    assert trained.returncode == 0, trained.stderr[-3000:]
    checkpoint = work / "checkpoints" / ARCH / "checkpoint_last.pt"
    assert checkpoint.is_file()

    evaluated = run(
        [
            "bash",
            str(GEC / "evaluate.sh"),
            "--work-dir",
            str(work),
            "--checkpoint",
            str(checkpoint),
            "--test-m2",
            str(raw / "test.m2"),
            "--out-dir",
            str(tmp_path / "eval"),
            "--gpus",
            "0",
            "--max-len-a",
            "1",
            "--max-len-b",
            "2",
        ]
    )
    assert evaluated.returncode == 0, evaluated.stderr[-3000:]
    hypotheses = read_hypotheses(str(tmp_path / "eval" / "hyp.txt"))
    assert len(hypotheses) == TEST_SENTENCES
    assert not any("@@" in hypothesis for hypothesis in hypotheses)
    expected = M2Scorer().score(hypotheses, read_m2(str(raw / "test.m2")))
    assert (tmp_path / "eval" / "m2.txt").read_text().splitlines() == m2_lines(expected)
    assert evaluated.stdout.splitlines()[1:4] == m2_lines(expected)


def test_prepare_names_a_missing_m2_file(tmp_path):
    absent = str(tmp_path / "absent.m2")
    result = run(
        [
            "bash",
            str(GEC / "prepare.sh"),
            "--work-dir",
            str(tmp_path / "work"),
            "--train-m2",
            absent,
            "--valid-m2",
            absent,
            "--test-m2",
            absent,
        ]
    )
    assert result.returncode == 1
    assert f"M2 file {absent} not found" in result.stderr
    assert not (tmp_path / "work").exists()


def test_m2_to_parallel_rejects_an_unknown_annotator(raw, tmp_path):
    result = run(
        [
            sys.executable,
            str(GEC / "m2_to_parallel.py"),
            str(raw / "test.m2"),
            "--out-prefix",
            str(tmp_path / "x"),
            "--annotator",
            "4",
        ]
    )
    assert result.returncode == 1
    assert "unknown annotator id 4" in result.stderr and not (tmp_path / "x.src").exists()
