"""quality_study.sh end to end on a slice of the Bible corpus: tiny residual and RK4 models, two
seeds each, trained, averaged, decoded and scored, then summarised as mean ± sd per configuration.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from ode_seq.analysis.flops import FlopCount
from ode_seq.metrics.bleu import paired_test
from tests.e2e.corpus import BIBLE_SLICE
from tests.e2e.test_translation_pipeline import run_script

STUDY_TABLE = Path(__file__).resolve().parents[2] / "examples" / "translation" / "study_table.py"
TINY_STUDY = [
    "--configs",
    "residual_6_6 rk4_6_6",
    "--seeds",
    "1 2",
    "--max-update",
    "10",
    "--save-interval-updates",
    "2",
    "--max-tokens",
    "600",
    "--embed-dim",
    "32",
    "--jobs",
    "2",
    *BIBLE_SLICE,
]


@pytest.fixture(scope="module")
def study(tmp_path_factory) -> tuple[Path, str]:
    work = tmp_path_factory.mktemp("quality-study")
    result = run_script("quality_study.sh", "--work-dir", str(work), *TINY_STUDY, "--record-dir", str(work / "records"))
    assert result.returncode == 0, result.stderr[-4000:]
    return work, result.stdout


def prepared_copy(work: Path, copy: Path) -> Path:
    """A new work dir holding ``work``'s prepared corpus and FLOP counts but none of its runs, records,
    tuning or tables: a study started there with the same corpus options begins at its runs."""
    ignored = shutil.ignore_patterns("grid", "runs", "tuned", "records", "results*", "tuning*")
    shutil.copytree(work, copy, ignore=ignored)
    return copy


def tables(text: str) -> list[dict[str, list[str]]]:
    """Every Markdown table of ``text`` in order, as {first cell: other cells} without headers."""
    found, rows = [], []
    for line in text.splitlines() + [""]:
        if line.startswith("|"):
            rows.append([cell.strip() for cell in line.strip("|").split("|")])
        elif rows:
            found.append({cells[0]: cells[1:] for cells in rows[2:]})
            rows = []
    return found


def test_table_reports_mean_and_sd_of_each_configurations_seeds(study):
    work, stdout = study
    rows = tables(stdout)[0]
    assert set(rows) == {"residual (Euler) 6-6", "RK4 6-6"}
    for name, config in (("residual (Euler) 6-6", "residual_6_6"), ("RK4 6-6", "rk4_6_6")):
        scores = [
            json.loads((work / "runs" / config / f"seed{seed}" / "eval-test" / "scores.json").read_text())["sacrebleu"][
                "13a"
            ]["score"]
            for seed in (1, 2)
        ]
        assert rows[name][4:6] == ["2", "10"]
        assert rows[name][7] == f"{statistics.mean(scores):.2f} ± {statistics.stdev(scores):.2f}"
        assert rows[name][9] == f"{scores[0]:.2f} (seed 1), {scores[1]:.2f} (seed 2)"
    assert rows["residual (Euler) 6-6"][8] == "(baseline)"
    assert re.fullmatch(r"[01]\.\d{3} \(seed 1\), [01]\.\d{3} \(seed 2\)", rows["RK4 6-6"][8])
    # compute: counted FLOPs per target token; RK4's encoder evaluates each layer four times
    per_token = {name: [float(rows[name][i].removesuffix(" M")) for i in (2, 3)] for name in rows}
    assert all(r < k for r, k in zip(per_token["residual (Euler) 6-6"], per_token["RK4 6-6"]))
    assert (work / "results-compute.png").read_bytes().startswith(b"\x89PNG")
    assert "sacreBLEU signature: nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:" in stdout
    differences = tables(stdout)[1]
    assert list(differences) == ["RK4 6-6"] and len(differences["RK4 6-6"][1].split(", ")) == 2
    assert (work / "results.md").read_text() == stdout


def test_rk4_has_the_residual_models_parameters_and_four_times_its_encoder_evaluations(study):
    rows = tables(study[1])[0]
    assert rows["RK4 6-6"][0] == rows["residual (Euler) 6-6"][0]
    assert (rows["residual (Euler) 6-6"][1], rows["RK4 6-6"][1]) == ("6", "24")


def test_seeds_give_different_models(study):
    work = study[0]
    logs = [(work / "runs" / "rk4_6_6" / f"seed{seed}" / "train.log").read_text() for seed in (1, 2)]
    assert "seed=1," in logs[0] and "seed=2," in logs[1]
    losses = [re.findall(r"\| loss ([\d.]+)", log) for log in logs]
    assert losses[0] and losses[1] and losses[0] != losses[1]


def load_study_table():
    spec = importlib.util.spec_from_file_location("study_table", STUDY_TABLE)
    module = importlib.util.module_from_spec(spec)
    sys.modules["study_table"] = module
    spec.loader.exec_module(module)
    return module


REFERENCES = [
    "En el principio creó Dios los cielos y la tierra .",
    "Y la tierra estaba desordenada y vacía .",
    "Y dijo Dios : Sea la luz ; y fue la luz .",
    "Y vio Dios que la luz era buena .",
    "Y llamó Dios a la luz Día , y a las tinieblas llamó Noche .",
    "Y fue la tarde y la mañana un día .",
    "Luego dijo Dios : Haya expansión en medio de las aguas .",
    "E hizo Dios la expansión , y separó las aguas .",
    "Y llamó Dios a la expansión Cielos .",
    "Dijo también Dios : Júntense las aguas que están debajo de los cielos en un lugar .",
]


def translations(drop_every: int) -> list[str]:
    """Imperfect 'translations' of REFERENCES: every drop_every-th word left out."""
    return [
        " ".join(w for j, w in enumerate(line.split()) if (i + j) % drop_every != drop_every - 1)
        for i, line in enumerate(REFERENCES)
    ]


def fake_run(
    runs_dir: Path, config: str, seed: int, bleu: float, method: str = "rk4", hypotheses: list[str] | None = None
) -> None:
    run_dir = runs_dir / config / f"seed{seed}"
    (run_dir / "eval-test").mkdir(parents=True)
    (run_dir / "eval-test" / "generate-test.txt").write_text(
        "".join(f"H-{i}\t-0.5\t{line}\n" for i, line in enumerate(hypotheses or translations(4)))
    )
    (run_dir / "train.log").write_text(
        f"Namespace(encoder_layers=6, encoder_ode_method='{method}', seed={seed})\n"
        "num. shared model params: 1,234 (num. trained: 1,234)\n"
        "| train | epoch 002 | loss 5.0 | wpb 1000.0 | bsz 4 | num_updates 800 | lr 0.001\n"
        f"| valid on 'valid' subset | loss 6.0 | nll_loss {bleu / 2} | ppl 2.0 | num_updates 800\n"
        "done training in 600.0 seconds\n"
    )
    sacrebleu = {"score": bleu, "signature": "nrefs:1|tok:13a"}
    (run_dir / "eval-test" / "scores.json").write_text(
        json.dumps({"tokenised_compound_split": {"score": bleu + 1}, "sacrebleu": {"13a": sacrebleu}})
    )


# FLOPs of a batch of 1,000 target tokens: training 3.00 M and inference 1.00 M per token (RK4),
# 1.50 M and 0.50 M (residual).
FLOPS = {"rk4_6_6": FlopCount(1000, 3 * 10**9, 10**9), "residual_6_6": FlopCount(1000, 15 * 10**8, 5 * 10**8)}


def test_table_arithmetic_on_known_scores(tmp_path):
    table = load_study_table().table
    for seed, bleu in ((1, 10.0), (2, 12.0), (3, 17.0)):
        fake_run(tmp_path, "rk4_6_6", seed, bleu)
    (tmp_path / "rk4_6_6" / "seed4").mkdir()
    text = table(tmp_path, ["rk4_6_6", "residual_6_6"], "recipe", REFERENCES, FLOPS)
    rows, curves = tables(text)
    assert rows["RK4 6-6"] == [
        "1,234",
        "24",
        "3.00 M",
        "1.00 M",
        "3",
        "800",
        "2.40e+12",  # 800 updates × 1,000 tokens × 3.00 M
        "13.00 ± 3.61",
        "",
        "10.00 (seed 1), 12.00 (seed 2), 17.00 (seed 3)",
        "14.00 ± 3.61",
        "6.500 ± 1.803",
        "10.0",
    ]
    assert rows["residual (Euler) 6-6"][:4] == ["", "", "1.50 M", "0.50 M"]
    assert rows["residual (Euler) 6-6"][7] == "no finished runs"
    assert curves == {"RK4 6-6": ["6.500"]}
    assert "cheapest first: RK4 6-6 seed 3 (2.40e+12, 17.00)." in text

    # Seed 1: the same translations as RK4 (p = 1); seed 3: worse ones (p from the paired test).
    for seed, bleu, drop_every in ((1, 9.0, 4), (3, 16.0, 2)):
        fake_run(tmp_path, "residual_6_6", seed, bleu, method="euler", hypotheses=translations(drop_every))
    text = table(tmp_path, ["residual_6_6", "rk4_6_6"], "recipe", REFERENCES, FLOPS)
    rows, differences, curves = tables(text)
    report, _ = paired_test(
        translations(4), translations(2), REFERENCES, "es", hypotheses_tokenised=True, tokenizers=("13a",)
    )
    assert rows["RK4 6-6"][8] == f"1.000 (seed 1), {report.comparisons[0].p_value:.3f} (seed 3)"
    assert report.comparisons[0].p_value < 0.05
    assert rows["residual (Euler) 6-6"][8] == "(baseline)"
    assert rows["residual (Euler) 6-6"][6] == "1.20e+12"
    # residual seed 3 (16.00) is the best of the cheaper runs; RK4 seed 3 (17.00) beats it at twice the FLOPs
    assert "cheapest first: residual (Euler) 6-6 seed 3 (1.20e+12, 16.00); RK4 6-6 seed 3 (2.40e+12, 17.00)." in text
    assert differences == {"RK4 6-6": ["1.00 ± 0.00", "+1.00, +1.00"]}
    assert curves == {"residual (Euler) 6-6": ["6.250"], "RK4 6-6": ["6.500"]}


def test_table_refuses_a_run_whose_translation_skipped_a_sentence(tmp_path):
    fake_run(tmp_path, "residual_6_6", 1, 9.0, method="euler")
    fake_run(tmp_path, "rk4_6_6", 1, 9.0, hypotheses=translations(4)[:-1])
    with pytest.raises(ValueError, match="no H- line for 1 of 10 sentences, ids 9"):
        load_study_table().table(tmp_path, ["residual_6_6", "rk4_6_6"], "recipe", REFERENCES, FLOPS)


def test_a_fresh_work_dir_resumes_from_the_records_without_training(study, tmp_path):
    work, first = study
    fresh = tmp_path / "fresh"
    again = run_script("quality_study.sh", "--work-dir", str(fresh), *TINY_STUDY, "--record-dir", str(work / "records"))
    assert again.returncode == 0, again.stderr[-4000:]
    assert again.stderr.count("reused the record") == 4 and "finished" not in again.stderr
    assert not list(fresh.rglob("*.pt"))
    assert again.stdout == first


def test_a_record_of_other_settings_is_refused(study, tmp_path):
    """In a copy of the study's prepared work dir: the same corpus, so only the settings differ."""
    other = prepared_copy(study[0], tmp_path / "other")
    records = ["--record-dir", str(study[0] / "records")]
    result = run_script("quality_study.sh", "--work-dir", str(other), *TINY_STUDY, "--max-update", "12", *records)
    assert result.returncode != 0 and "was made with other settings" in result.stderr
    assert not (other / "grid").exists()  # refused before any run started


def test_a_record_of_other_data_is_refused(study, tmp_path):
    """A fresh work dir prepares fewer training pairs; one configuration's record suffices."""
    records = ["--record-dir", str(study[0] / "records")]
    args = [*TINY_STUDY, "--train-pairs", "150", "--configs", "residual_6_6", *records]
    result = run_script("quality_study.sh", "--work-dir", str(tmp_path / "other"), *args)
    assert result.returncode != 0 and "was made on other data" in result.stderr


def test_rerun_reuses_every_run(study):
    work, first = study
    again = run_script("quality_study.sh", "--work-dir", str(work), *TINY_STUDY)
    assert again.returncode == 0, again.stderr[-4000:]
    assert again.stderr.count("skip scoring") == 4
    for train_output in (work / "runs").glob("*/seed*/train.stdout"):
        assert "skip training" in train_output.read_text()
    assert again.stdout == first


@pytest.mark.parametrize(
    "args, message",
    [
        (["--configs", "rk8_6_6"], "unknown configuration 'rk8_6_6'"),
        (["--max-update", "40"], "--max-update 40 saves fewer than the 5 checkpoints"),
        (["--seeds", "one"], "got 'one'"),
        (["--embed-dim", "100"], "--embed-dim must be a multiple of 32"),
        (["--tune", "--setting", "residual_6_6=4e-3"], "--setting takes CONFIG=LR/WARMUP"),
        (["--tune", "--setting", "iiet_6_6=4e-3/300"], "names iiet_6_6, which is not in --configs"),
        (["--setting", "residual_6_6=4e-3/300"], "--setting is for --tune"),
    ],
)
def test_bad_options_fail_before_any_work(tmp_path, args, message):
    result = run_script("quality_study.sh", "--work-dir", str(tmp_path / "work"), *args)
    assert result.returncode != 0
    assert message in result.stderr
    assert not (tmp_path / "work").exists()


def test_table_script_runs_from_any_directory_without_pythonpath(tmp_path):
    fake_run(tmp_path / "runs", "rk4_6_6", 1, 7.0)
    (tmp_path / "ref.es").write_text("".join(line + "\n" for line in REFERENCES), encoding="utf-8")
    (tmp_path / "flops").mkdir()
    (tmp_path / "flops" / "rk4_6_6.txt").write_text(FLOPS["rk4_6_6"].lines(), encoding="utf-8")
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    result = subprocess.run(
        [
            sys.executable,
            str(STUDY_TABLE),
            "--runs-dir",
            str(tmp_path / "runs"),
            "--configs",
            "rk4_6_6",
            "--ref",
            "ref.es",
            "--flops-dir",
            "flops",
            "--compute-figure",
            "compute.png",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
    )
    assert result.returncode == 0, result.stderr
    assert "| RK4 6-6 | 1,234 | 24 | 3.00 M | 1.00 M | 1 | 800 | 2.40e+12 | 7.00 (1 seed) |  |" in result.stdout
    assert (tmp_path / "compute.png").read_bytes().startswith(b"\x89PNG")
    missing = subprocess.run(
        [sys.executable, str(STUDY_TABLE), "--runs-dir", str(tmp_path / "no"), "--ref", "ref.es", "--flops-dir", "f"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
    )
    assert missing.returncode == 2 and "run quality_study.sh first" in missing.stderr


def test_tune_picks_a_setting_beside_a_given_one_and_a_work_dir_without_runs_resumes_from_the_records(study, tmp_path):
    """A PCformer row (its encoder evaluations counted with the corrector's) tuned: the lrs at the
    default warmup, then the warmups at the best lr, the chosen setting's tuning run reused as seed 1;
    beside a residual model whose --setting is not tuned (its runs: the records of the study above);
    then the whole tuned study resumes from its records in a work dir with none of its runs."""
    records = tmp_path / "records"
    shutil.copytree(study[0] / "records", records)
    work = prepared_copy(study[0], tmp_path / "tuned")  # the corpus and the residual model's FLOPs
    args = [*TINY_STUDY, "--configs", "residual_6_6 pcformer_6_6", "--tune", "--tune-lrs", "4e-3 8e-3"]
    args += ["--tune-warmups", "5", "--setting", "residual_6_6=2e-3/300", "--record-dir", str(records)]
    result = run_script("quality_study.sh", "--work-dir", str(work), *args)
    assert result.returncode == 0, result.stderr[-4000:]
    assert result.stderr.count("reused the record of residual_6_6") == 2
    grid = work / "grid" / "pcformer_6_6"
    chosen = (work / "tuned" / "pcformer_6_6").resolve()
    lr = chosen.name.removeprefix("lr").split("-warmup")[0]
    tried = ["lr4e-3-warmup300", "lr8e-3-warmup300", f"lr{lr}-warmup5"]
    assert sorted(p.name for p in grid.iterdir()) == sorted(tried)
    assert [p.name for p in (work / "grid" / "residual_6_6").iterdir()] == ["lr2e-3-warmup300"]
    assert chosen.parent == grid and (chosen / "seed2" / "eval-test" / "scores.json").is_file()
    assert (chosen / "seed1" / "eval-test" / "scores.json").is_file()  # the tuning run, evaluated
    assert [d.name for d in grid.iterdir() if (d / "seed2").exists()] == [chosen.name]
    tuning = (work / "tuning.md").read_text()
    assert "residual" not in tuning and tuning.count("| PCformer 6-6") == 3 and tuning.count("**") >= 2
    warmup = chosen.name.split("-warmup")[1]
    assert f"pcformer_6_6 lr={lr} warmup={warmup}" in result.stdout
    assert "residual_6_6 lr=2e-3 warmup=300 (given by --setting)" in result.stdout
    assert (work / "results-tuned.md").read_text() in result.stdout
    rows = tables((work / "results-tuned.md").read_text())[0]
    pcformer = next(cells for name, cells in rows.items() if name.startswith("PCformer 6-6"))
    assert (rows["residual (Euler) 6-6"][1], pcformer[1]) == ("6", "30")
    assert pcformer[0] != rows["residual (Euler) 6-6"][0]  # the corrector's weights
    fresh = prepared_copy(work, tmp_path / "fresh")
    again = run_script("quality_study.sh", "--work-dir", str(fresh), *args)
    assert again.returncode == 0, again.stderr[-4000:]
    assert "reused the record" in again.stderr and "finished" not in again.stderr
    assert not list(fresh.rglob("*.pt"))
    assert (fresh / "tuning.md").read_text() == tuning
    assert (fresh / "results-tuned.md").read_text() == (work / "results-tuned.md").read_text()


def test_the_compute_matched_residual_model_trains_the_updates_that_spend_pcformers_training_flops(tmp_path):
    """residual_6_6_pcformer_compute: --max-update × (PCformer's training FLOPs per token / its own),
    rounded to whole --save-interval-updates; train_bible.sh is a stub that records its options."""
    root = tmp_path / "repo"
    (root / "examples" / "translation").mkdir(parents=True)
    examples = STUDY_TABLE.parents[1]
    shutil.copy(examples / "lib.sh", root / "examples" / "lib.sh")
    shutil.copy(examples / "translation" / "quality_study.sh", root / "examples" / "translation")
    (root / "scripts").mkdir()
    shutil.copy(examples.parent / "scripts" / "supervise.sh", root / "scripts")
    stub = root / "examples" / "translation" / "train_bible.sh"
    stub.write_text(f'#!/bin/sh\necho "$@" > {tmp_path}/train_bible.args\nexit 1\n')
    stub.chmod(0o755)
    (root / ".venv").symlink_to(Path(sys.prefix))
    work = tmp_path / "study"
    (work / "flops").mkdir(parents=True)
    for config, count in (
        ("pcformer_6_6", FlopCount(1000, 5743 * 10**7, 10**9)),  # 2.457× the residual model's, as measured
        ("residual_6_6_pcformer_compute", FlopCount(1000, 2337 * 10**7, 10**9)),
    ):
        (work / "flops" / f"{config}.txt").write_text(count.lines(), encoding="utf-8")
    result = subprocess.run(
        [str(root / "examples" / "translation" / "quality_study.sh"), "--work-dir", str(work), "--gpus", "0"]
        + ["--run", "residual_6_6_pcformer_compute 1 4e-3 300 train"],
        capture_output=True,
        text=True,
        env={k: v for k, v in os.environ.items() if k != "ODE_SEQ_VENV"},
    )
    assert result.returncode == 1, result.stderr  # the stub fails after recording
    options = (tmp_path / "train_bible.args").read_text().split()
    assert options[options.index("--max-update") + 1] == "1950"  # 800 × 2.457 = 1966 → 39 × 50
    assert options[options.index("--arch") + 1] == "ode_transformer_euler_small"
    assert (
        "max_update=1950 "
        in (
            work / "grid" / "residual_6_6_pcformer_compute" / "lr4e-3-warmup300" / "seed1" / "run-config.txt"
        ).read_text()
    )
