"""The converged language-model study (examples/language_modeling/study.sh) end to end on a slice
of the Bible at a tiny width: lr tuning on seed 1 (two epochs per lr, the chosen one trained on),
seeds, runs stopped by the epoch cap or patience, the table with paired bootstrap p-values over
test verses, the curves figure, the run records and a fresh work dir resumed from them; and its
helpers (verse scores, the paired test)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.e2e.cli import run_pipeline

REPO_ROOT = Path(__file__).resolve().parents[2]
PIPELINE = REPO_ROOT / "examples" / "language_modeling"
sys.path.insert(0, str(PIPELINE))
import lm_study_table  # noqa: E402  (the study's table, a script beside the shell scripts)
import lm_text  # noqa: E402

TINY = ["--train-lines", "300", "--valid-lines", "20", "--test-lines", "20", "--workers", "1"]
TINY += ["--configs", "residual rk2_learned", "--tuned", "residual", "--tune-lrs", "4e-3 8e-3", "--tune-epochs", "2"]
TINY += ["--seeds", "1 2"]
TINY += ["--max-epoch", "3", "--patience", "1", "--jobs", "2", "--gpus", "0", "--adaptive", "100,300"]  # 560 words
TINY_WIDTH = ["--decoder-embed-dim", "32", "--decoder-ffn-embed-dim", "64", "--decoder-input-dim", "32"]
TINY_WIDTH += ["--decoder-output-dim", "32"]


def study_in(work: Path, records: Path, *options: str) -> subprocess.CompletedProcess:
    """study.sh at the tiny settings; ``options`` (given after them) win."""
    args = ["--work-dir", str(work), "--record-dir", str(records), *TINY, *options, "--", *TINY_WIDTH]
    return run_pipeline(PIPELINE / "study.sh", *args)


@pytest.fixture(scope="module")
def study(tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess]:
    work = tmp_path_factory.mktemp("lm-study")
    result = study_in(work, work / "records")
    assert result.returncode == 0, result.stderr[-4000:]
    return work, result


def prepared_copy(work: Path, copy: Path) -> Path:
    """A new work dir holding ``work``'s prepared corpus and FLOP counts but none of its runs or
    records: a study started there with the same corpus options begins at its runs."""
    shutil.copytree(work, copy, ignore=shutil.ignore_patterns("grid", "chosen", "records"))
    return copy


def table_rows(text: str, first_cell: str) -> list[list[str]]:
    return [
        [cell.strip() for cell in line.strip("|").split("|")]
        for line in text.splitlines()
        if line.startswith(f"| {first_cell}")
    ]


def test_the_table_compares_each_seed_with_the_residual_model_and_says_why_runs_stopped(study):
    work, result = study
    results = (work / "results.md").read_text()
    assert result.stdout.strip() == results.strip()
    (residual,) = [row for row in table_rows(results, "residual (Euler)") if row[1].replace(",", "").isdigit()]
    (rk2,) = [row for row in table_rows(results, "RK2, learned coefficients") if row[1].replace(",", "").isdigit()]
    assert (residual[2], rk2[2], residual[5], rk2[5]) == ("2", "4", "2", "2")
    assert residual[8] == "(baseline)" and rk2[8].count("(p = ") == 2
    for row in (residual, rk2):
        assert all(stop in ("3 (epoch cap)", "1 (patience)", "2 (patience)") for stop in row[10].split(", "))
    # compute: counted FLOPs per token (training, inference), more for RK2's two evaluations per layer
    per_token = [[float(row[i].removesuffix(" M")) for i in (3, 4)] for row in (residual, rk2)]
    assert all(r < k for r, k in zip(*per_token)) and all(t > i for t, i in per_token)
    assert float(residual[11]) > 0 and "The Pareto front of test perplexity" in results
    assert "At the residual model's training compute" in results
    for figure in ("curves.png", "compute.png"):
        assert (work / figure).read_bytes().startswith(b"\x89PNG")


def test_every_run_trains_an_adaptive_input_and_softmax_with_the_adaptive_loss(study):
    work, _ = study
    logs = [log.read_text() for log in (work / "grid").glob("*/lr*/seed*/train.log")]
    assert len(logs) == 5
    for log in logs:
        assert "adaptive_softmax_cutoff='100,300'" in log and "adaptive_input_cutoff='100,300'" in log
        assert "tie_adaptive_weights=True" in log and "'_name': 'adaptive_loss'" in log


def test_the_tuned_lr_is_bracketed_or_flagged_and_the_untuned_configuration_shares_it(study):
    work, _ = study
    results = (work / "results.md").read_text()
    tuning = [row for row in table_rows(results, "residual (Euler)") if row[1] in ("4e-3", "8e-3")]
    assert len(tuning) == 2 and sum("**" in row[2] for row in tuning) == 1
    chosen = next(row[1] for row in tuning if "**" in row[2])
    assert "is at the edge of the grid" in results  # a two-value grid: the choice is always at an edge
    assert [d.name for d in (work / "grid" / "rk2_learned").iterdir()] == [f"lr{chosen}"]
    assert (work / "chosen" / "rk2_learned").resolve() == work / "grid" / "rk2_learned" / f"lr{chosen}"


def test_only_the_chosen_lr_trains_on_after_the_tuning_epochs(study):
    work, _ = study
    chosen = (work / "chosen" / "residual").resolve()
    for setting in (work / "grid" / "residual").iterdir():
        run = setting / "seed1"
        tuning = lm_study_table.validation_bits((run / "tuning.log").read_text())
        trained = lm_study_table.validation_bits((run / "train.log").read_text())
        assert len(tuning) == 2 and trained[:2] == tuning  # patience 1 cannot stop a run before epoch 2
        if setting == chosen:  # trained on to the cap, unless patience ended it in its tuning epochs
            assert len(trained) == 3 or "early stop" in (run / "tuning.log").read_text()
            assert (run / "eval-test" / "verse-scores.txt").is_file()
        else:
            assert trained == tuning and not (run / "eval-test").exists()


def test_a_validation_repeated_by_a_resumed_run_counts_once():
    log = "\n".join(
        f"| valid | epoch {epoch:03d} | valid on 'valid' subset | loss {loss} | ppl 9 | num_updates {epoch}"
        for epoch, loss in ((1, 6.5), (2, 6.0), (2, 5.9), (3, 5.5))
    )
    assert lm_study_table.validation_bits(log) == [6.5, 5.9, 5.5]


def test_every_test_verse_has_a_log_likelihood_that_sums_to_the_reported_perplexity(study):
    work, _ = study
    for run in (work / "chosen").glob("*/seed*"):
        verses = np.loadtxt(run / "eval-test" / "verse-scores.txt", ndmin=2)
        assert len(verses) == 20
        reported = float((run / "eval-test" / "scores.txt").read_text().split()[2])
        # fairseq sums float32 log-probabilities (relative error ≲ tokens · 2⁻²⁴ ≈ 2·10⁻⁵ of ~10 nats
        # per token) and prints 2 decimals; the verse scores carry 6 decimals per token.
        assert lm_study_table.perplexity(verses) == pytest.approx(reported, rel=1e-3)


def test_a_fresh_work_dir_resumes_from_the_records_without_training(study, tmp_path):
    work, first = study
    again = study_in(tmp_path / "fresh", work / "records")
    assert again.returncode == 0, again.stderr[-4000:]
    # tuning: residual at both lrs (the chosen one's whole run, the other's tuning record); then seeds
    # 1 and 2 of both configurations
    assert again.stderr.count("reused the record") + again.stderr.count("reused the tuning record") == 6
    assert "finished" not in again.stderr and "tuned residual" not in again.stderr
    assert not list((tmp_path / "fresh").rglob("*.pt"))
    assert again.stdout == first.stdout


def test_a_run_kept_unfinished_resumes_in_a_fresh_work_dir_and_ends_as_if_never_stopped(study, tmp_path):
    work, _ = study
    records = tmp_path / "records"
    shutil.copytree(work / "records", records)
    lr = (work / "chosen" / "residual").resolve().name.removeprefix("lr")
    run = Path("grid") / "residual" / f"lr{lr}" / "seed2"
    shutil.rmtree(records / run)
    # residual seed 2 as a study stopped after its first epoch leaves it (trained with a cap of 1
    # epoch, recorded elsewhere), kept at the study's settings, then run in a fresh work dir
    stopped, fresh = (prepared_copy(work, tmp_path / name) for name in ("stopped", "fresh"))
    first_epoch = study_in(stopped, tmp_path / "elsewhere", "--max-epoch", "1", "--run", f"residual 2 {lr}")
    assert first_epoch.returncode == 0, first_epoch.stderr[-4000:]
    kept_dir = tmp_path / "unfinished"  # outside the records: checkpoints are never committed
    kept = study_in(stopped, records, "--keep-unfinished", "--unfinished-dir", str(kept_dir))
    assert kept.returncode == 0, kept.stderr[-4000:]
    assert f"kept residual seed 2 (lr {lr}) at epoch 1" in kept.stderr and kept.stderr.count("kept ") == 1
    unfinished = kept_dir / "residual" / f"lr{lr}" / "seed2"
    assert (unfinished / "checkpoint_last.pt.gz").is_file() and not (unfinished / "checkpoint_best.pt.gz").exists()
    assert not list(records.rglob("*.pt*"))

    again = study_in(fresh, records, "--unfinished-dir", str(kept_dir), "--run", f"residual 2 {lr}")
    assert again.returncode == 0, again.stderr[-4000:]
    assert f"resumed residual seed 2 (lr {lr}) from its kept state" in again.stderr
    assert (records / run).is_dir() and not unfinished.exists()
    resumed, uninterrupted = (fresh / run, work / run)
    assert "Loaded checkpoint" in (resumed / "train.log").read_text()
    curves = [lm_study_table.validation_bits((d / "train.log").read_text()) for d in (resumed, uninterrupted)]
    assert curves[0] == curves[1] and len(curves[0]) >= 2
    scores = [(d / "eval-test" / "scores.txt").read_text() for d in (resumed, uninterrupted)]
    assert scores[0] == scores[1]


def test_keeping_unfinished_runs_needs_a_directory_outside_the_records(tmp_path):
    result = run_pipeline(PIPELINE / "study.sh", "--work-dir", str(tmp_path), "--keep-unfinished")
    assert result.returncode == 2
    assert (
        "--keep-unfinished keeps the runs in --unfinished-dir: name a directory outside --record-dir" in result.stderr
    )
    inside = run_pipeline(
        PIPELINE / "study.sh",
        "--work-dir",
        str(tmp_path),
        "--keep-unfinished",
        "--record-dir",
        str(tmp_path / "r"),
        "--unfinished-dir",
        str(tmp_path / "r" / "unfinished"),
    )
    assert (
        inside.returncode == 2
        and "is inside --record-dir" in inside.stderr
        and "never kept with the records" in inside.stderr
    )


def test_a_record_of_other_settings_is_refused(study, tmp_path):
    """In a copy of the study's prepared work dir: the same corpus, so only the settings differ."""
    other = prepared_copy(study[0], tmp_path / "other")
    result = study_in(other, study[0] / "records", "--patience", "2")
    assert result.returncode != 0 and "was made with other settings" in result.stderr


@pytest.mark.parametrize("prefix", ["2026-12-02 10:00:00 | INFO | fairseq_cli.eval_lm | ", "INFO:fairseq_cli.eval_lm:"])
def test_verse_scores_follow_the_blocks_in_sample_order_and_cut_at_line_ends(prefix):
    log = "\n".join(
        [
            f"{prefix}1 c [-0.5]\t</s> [-0.25]\td [-1.0]",
            f"{prefix}0 a [-1.5]\t[ [-2.0]\t</s> [-0.5]\tb [-2.5e-01]",
            f"{prefix}2 </s> [-3.0]",
        ]
    )
    assert lm_text.verse_scores(log, 8) == ["-4.0\t3", "-1.0\t3", "-4.0\t2"]
    with pytest.raises(ValueError, match="scores 8 tokens in 3 complete lines, but the subset holds 9"):
        lm_text.verse_scores(log, 9)
    with pytest.raises(ValueError, match="scores 7 tokens in 2 complete lines"):
        lm_text.verse_scores(log.rsplit("\n", 1)[0], 7)


def test_the_paired_test_over_verses():
    rng = np.random.default_rng(0)
    tokens = rng.integers(5, 30, size=200).astype(float)
    baseline = np.stack([-4.0 * tokens + rng.normal(0, 3, 200), tokens], axis=1)
    assert lm_study_table.paired_p_value(baseline, baseline) == 1.0
    better = baseline + np.stack([0.5 * tokens, 0 * tokens], axis=1)
    assert lm_study_table.paired_p_value(better, baseline) == pytest.approx(1 / 1001)
    with pytest.raises(ValueError, match="scored different test verses"):
        lm_study_table.paired_p_value(baseline[:-1], baseline[1:])


def test_the_equal_compute_table_marks_runs_that_spent_the_budget_before_an_epoch_ended(tmp_path):
    def run(seed: int, bits: list[float], tokens: list[float]) -> lm_study_table.Run:
        return lm_study_table.Run(seed, 1, 2, bits, tokens, "patience", 1.0, 1.0, None, None, tmp_path)

    flops = {
        name: lm_study_table.FlopCount(1, per_token, per_token)
        for name, per_token in (("residual", 1), ("rk2_learned", 2), ("pcformer_rk2", 4))
    }
    by_config = {  # the residual runs spend 2 FLOPs to their scored checkpoint (epoch 2)
        "residual": [run(1, [5.0, 4.0, 4.5], [1, 2, 3]), run(2, [5.0, 4.0, 4.5], [1, 2, 3])],
        "rk2_learned": [run(1, [4.5, 3.0], [1, 2]), run(2, [3.5, 3.0], [2, 4])],  # seed 2: none within
        "pcformer_rk2": [run(1, [3.0], [1]), run(2, [3.0], [1])],  # none within on either seed
    }
    rows = {row[0]: row[1:] for row in table_rows("\n".join(lm_study_table.equal_compute_table(by_config, flops)), "")}
    assert rows["residual (Euler)"] == ["16.00", "16.00", "16.00"]
    assert rows["RK2, learned coefficients"] == ["22.63", "—", ""]  # a mean needs every seed
    assert rows["PCformer (Heun predictor, EMA weights, multistep corrector)"] == ["—", "—", "—"]


def test_the_speed_check_times_each_configuration_and_sizes_the_study_without_running_it(study, tmp_path):
    work = prepared_copy(study[0], tmp_path / "speed")  # the corpus it times
    result = study_in(work, tmp_path / "records", "--speed-check", "4", "--adaptive", "none")
    assert result.returncode == 0, result.stderr[-4000:]
    assert result.stdout.strip() == (work / "speed.md").read_text().strip()
    rows = {row[0]: row for row in table_rows(result.stdout, "")}
    residual, rk2 = rows["residual (Euler)"], rows["RK2, learned coefficients"]
    assert (residual[2], rk2[2]) == ("2", "4")  # layer evaluations per token
    assert (residual[5], rk2[5]) == ("3", "2")  # residual: 2 tuning lrs + seed 2; RK2-learned: seeds 1, 2
    tuning_epochs = {"residual": 2, "rk2_learned": 0}  # the lr not chosen trains --tune-epochs epochs
    for config, row in (("residual", residual), ("rk2_learned", rk2)):
        speed = lm_study_table.read_speed(work / "speed" / config)
        assert (row[3], row[4]) == (f"{speed.tokens_per_second:,.0f}", f"{speed.minutes_per_epoch:.2f}")
        # batches per epoch × mean tokens per batch: the training split's tokens, but for a short last batch
        lines = (work / "tok" / "train.txt").read_text().splitlines()
        assert 1 <= speed.tokens_per_epoch / sum(len(line.split()) + 1 for line in lines) < 1.5
        epochs = [2 * cap + tuning_epochs[config] for cap in (20, 3)]  # 2 seeds; 3: the --max-epoch cap
        hours = [e * speed.minutes_per_epoch / 60 for e in epochs]
        assert (row[6], row[7]) == (f"{hours[0]:.2f}", f"{hours[1]:.2f}")
    assert not (work / "grid").exists() and not list(work.rglob("*.pt"))
    assert "'_name': 'cross_entropy'" in (work / "speed" / "residual" / "train.log").read_text()  # a full softmax


def test_the_speed_table_names_a_configuration_without_a_speed_check(tmp_path):
    with pytest.raises(ValueError, match="has no speed check's training log"):
        lm_study_table.read_speed(tmp_path / "residual")


def test_rk2_learneds_layers_as_a_residual_model_fine_tune_for_a_share_of_its_training_flops(study, tmp_path):
    """rk2_learned_as_residual: each seed's RK2-learned best checkpoint as the residual model of its
    layers (ode-seq as-residual), fine-tuned for --residual-share of the teacher run's FLOPs, scored
    and paired with its teacher: the study's run where its checkpoint is here (seed 1), else a
    retraining of it (seed 2: as from a record), which the run's record keeps; its training FLOPs
    count the teacher's."""
    work = tmp_path / "work"
    shutil.copytree(study[0], work, symlinks=True)
    (lr,) = [d.name for d in (work / "grid" / "rk2_learned").iterdir()]
    for checkpoint in (work / "grid" / "rk2_learned" / lr / "seed2").glob("*.pt"):
        checkpoint.unlink()
    result = study_in(work, work / "records", "--configs", "residual rk2_learned rk2_learned_as_residual")
    assert result.returncode == 0, result.stderr[-4000:]
    assert [d.name for d in (work / "grid" / "rk2_learned_as_residual").iterdir()] == [lr]
    teacher_flops, student_flops = (
        lm_study_table.FlopCount.parse((work / "flops" / f"{c}.txt").read_text(), c)
        for c in ("rk2_learned", "rk2_learned_as_residual")
    )
    for seed in (1, 2):
        run = work / "grid" / "rk2_learned_as_residual" / lr / f"seed{seed}"
        teacher_log = (work / "grid" / "rk2_learned" / lr / f"seed{seed}" / "train.log").read_text()
        epochs = len(lm_study_table.validation_bits(teacher_log))
        expected = max(1, int(0.1 * epochs * teacher_flops.training_per_token / student_flops.training_per_token))
        log = (run / "train.log").read_text()
        assert "decoder_ode_method='euler'" in log and "finetune_from_model" in log
        assert len(lm_study_table.validation_bits(log)) == expected
        assert (run / "residual-init.pt").is_file() and (run / "eval-test" / "verse-scores.txt").is_file()
        assert (run / "teacher").exists() == (seed == 2)
    retrained = work / "teachers" / "rk2_learned" / lr / "seed2"
    # the same recipe, retrained: the same validation curve as the study's run (training here is deterministic)
    assert lm_study_table.validation_bits((retrained / "train.log").read_text()) == lm_study_table.validation_bits(
        (work / "grid" / "rk2_learned" / lr / "seed2" / "train.log").read_text()
    )
    record = work / "records" / "grid" / "rk2_learned_as_residual" / lr / "seed2"
    kept = {f"teacher/{f}.gz" for f in ("train.log", "eval-test/scores.txt", "eval-test/verse-scores.txt")}
    assert kept <= {line.split()[1] for line in (record / "MANIFEST.sha256").read_text().splitlines()}
    results = (work / "results.md").read_text()
    match = re.search(
        r"fine-tuned against the RK2, learned coefficients run it was made from \(paired bootstrap p over verses\): "
        r"seed 1 [+-]\d+\.\d\d \(p = [\d.]+\), seed 2 [+-]\d+\.\d\d \(p = [\d.]+; its teacher retrained: "
        r"([\d.]+), the study's run ([\d.]+)\)",
        results,
    )
    assert match and match.group(1) == match.group(2)
    scored_flops = {
        row[0]: float(row[11]) for row in table_rows(results, "RK2") if row[1].replace(",", "").isdigit()
    }  # the fine-tune's runs spend the teacher's FLOPs and more
    assert (
        scored_flops["RK2-learned's layers as a residual model, fine-tuned"] > scored_flops["RK2, learned coefficients"]
    )
