"""End to end through fairseq's real CLIs: preprocess → train → average → generate → BLEU,
interactive, the hub interface, and every registered architecture. The console scripts run here
once each (fairseq-train in the fixture ``trained``, fairseq-generate and fairseq-interactive in
the first tests that use it, plain fairseq-generate without the plugin); the other runs call the
same entry points in this process (:func:`testkit.in_process.run_in_process`)."""

from __future__ import annotations

import re

import pytest
import sacrebleu
import torch

from ode_seq.checkpoint_files import load_checkpoint
from ode_seq.models import ODETransformerModel
from ode_seq.models.architectures import ARCHITECTURES, SETTINGS
from testkit.in_process import run_in_process
from tests.e2e.cli import PRE_NORM, TINY_MODEL, TRAIN, export, run, subset_args
from tests.e2e.corpus import CLI_SIZES, WORDS, reversal_data_bin
from tests.numerics import score_tolerance


@pytest.fixture(scope="module")
def data_bin(tmp_path_factory):
    return reversal_data_bin(tmp_path_factory.mktemp("raw"), CLI_SIZES)


@pytest.fixture(scope="module")
def trained(data_bin, tmp_path_factory):
    """An RK4 encoder-decoder with learned gates, 3 epochs, averaged over the last 2."""
    save = tmp_path_factory.mktemp("ckpt")
    run(
        "fairseq-train",
        [
            str(data_bin),
            "--arch",
            "ode_transformer_rk4_encdec_small",
            *TINY_MODEL,
            *TRAIN,
            "--ode-coefficients",
            "learned",
            "--max-epoch",
            "3",
            "--save-dir",
            str(save),
        ],
    )
    out = run_in_process(
        "python",
        [
            "-m",
            "ode_seq.cli.average",
            "--inputs",
            str(save),
            "--num-epoch-checkpoints",
            "2",
            "--output",
            str(save / "averaged.pt"),
        ],
        check=True,
    )
    assert "checkpoint3.pt, checkpoint2.pt" in out.stdout
    return save


def _hypotheses(stdout: str):
    return {int(m.group(1)): m.group(2) for m in re.finditer(r"^H-(\d+)\t\S+\t(.*)$", stdout, re.M)}


def test_generate_from_averaged_checkpoint_translates_every_test_sentence(data_bin, trained):
    args = subset_args(
        data_bin, trained / "averaged.pt", "test", "--beam", "4", "--lenpen", "0.6", "--max-tokens", "1000"
    )
    out = run("fairseq-generate", args)
    hyps = _hypotheses(out.stdout)
    refs = {int(m.group(1)): m.group(2) for m in re.finditer(r"^T-(\d+)\t(.*)$", out.stdout, re.M)}
    assert sorted(hyps) == list(range(25)) and hyps.keys() == refs.keys()
    bleu = sacrebleu.corpus_bleu([hyps[i] for i in range(25)], [[refs[i] for i in range(25)]])
    assert 0.0 <= bleu.score <= 100.0
    assert re.search(r"Generate test with beam=4: BLEU4 = [\d.]+", out.stdout)


def test_generated_positional_scores_equal_teacher_forced_scores(data_bin, trained):
    common = [
        str(data_bin),
        "--user-dir",
        "user_dir",
        "--path",
        str(trained / "checkpoint_last.pt"),
        "--max-tokens",
        "1000",
        "--gen-subset",
        "valid",
    ]
    gen = run_in_process("fairseq-generate", [*common, "--beam", "3", "--nbest", "1"], check=True)
    hyps = _hypotheses(gen.stdout)
    scores = {int(i): [float(x) for x in s.split()] for i, s in re.findall(r"^P-(\d+)\t(.*)$", gen.stdout, re.M)}
    # Re-score the hypotheses as references under teacher forcing.
    tmp = trained / "rescore"
    tmp.mkdir(exist_ok=True)
    src_lines = (data_bin.parent / "valid.src").read_text().splitlines()
    (tmp / "valid.src").write_text("".join(src_lines[i] + "\n" for i in sorted(hyps)))
    (tmp / "valid.tgt").write_text("".join(hyps[i] + "\n" for i in sorted(hyps)))
    run_in_process(
        "fairseq-preprocess",
        [
            "--source-lang",
            "src",
            "--target-lang",
            "tgt",
            "--workers",
            "1",
            "--validpref",
            str(tmp / "valid"),
            "--destdir",
            str(tmp / "bin"),
            "--srcdict",
            str(data_bin / "dict.src.txt"),
            "--tgtdict",
            str(data_bin / "dict.tgt.txt"),
        ],
        check=True,
    )
    ref = run_in_process("fairseq-generate", [str(tmp / "bin"), *common[1:], "--score-reference"], check=True)
    ref_scores = {int(i): [float(x) for x in s.split()] for i, s in re.findall(r"^P-(\d+)\t(.*)$", ref.stdout, re.M)}
    order = sorted(hyps)
    assert len(ref_scores) == len(order) > 0
    for new_id, old_id in enumerate(order):  # P- lines: 4 decimals; RK4 2-2 layers: 16 evaluations
        tolerance = score_tolerance(scores[old_id], 16, decimals=4)
        assert ref_scores[new_id] == pytest.approx(scores[old_id], abs=tolerance)


def test_interactive_translates_stdin_lines(data_bin, trained):
    out = run(
        "fairseq-interactive",
        [
            str(data_bin),
            "--user-dir",
            "user_dir",
            "--path",
            str(trained / "averaged.pt"),
            "--beam",
            "2",
            "--source-lang",
            "src",
            "--target-lang",
            "tgt",
        ],
        stdin="w1 w2 w3\nw4 w5\n",
    )
    assert len(re.findall(r"^H-\d+\t", out.stdout, re.M)) == 2


def test_hub_interface_translates(data_bin, trained):
    model = ODETransformerModel.from_pretrained(
        str(trained),
        checkpoint_file="averaged.pt",
        data_name_or_path=str(data_bin),
        source_lang="src",
        target_lang="tgt",
    )
    assert all(token in WORDS for token in model.translate("w1 w2 w3", beam=2).split())


# Those of the standard layer kind; the other kinds train through fairseq-train in the reliability
# tests (testkit/families.py) and tests/stable/test_distillation_cli.py.
STANDARD_ARCHITECTURES = sorted(
    name for name, (setting, _) in ARCHITECTURES.items() if "layer_kind" not in SETTINGS[setting]
)


@pytest.mark.parametrize("arch", STANDARD_ARCHITECTURES)
def test_every_architecture_trains_through_fairseq_train(data_bin, tmp_path, arch):
    """fairseq-train's entry point, run in this process (the console script's code without its
    seconds of start-up; the fixture ``trained`` runs the console script itself)."""
    shared = ["--encoder-share-group-size", "2"] if "shared" in arch else []
    args = [str(data_bin), "--arch", arch, *TINY_MODEL, *shared, *TRAIN, "--max-update", "2"]
    result = run_in_process(
        "fairseq-train", [*args, "--save-dir", str(tmp_path), "--no-epoch-checkpoints", "--disable-validation"]
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert load_checkpoint(str(tmp_path / "checkpoint_last.pt"))["optimizer_history"][-1]["num_updates"] == 2


def test_adaptive_encoder_logs_nfe_and_generates_with_another_solver(data_bin, tmp_path):
    out = run_in_process(
        "fairseq-train",
        [
            str(data_bin),
            "--arch",
            "ode_transformer_parallel_shared_dopri5",
            *TINY_MODEL,
            "--encoder-share-group-size",
            "2",
            *TRAIN,
            "--max-update",
            "3",
            "--log-interval",
            "1",
            "--save-dir",
            str(tmp_path),
            "--max-epoch",
            "1",
        ],
        check=True,
    )
    log = out.stdout + out.stderr
    assert re.search(r"train_inner .*encoder_nfe=\d+", log)
    assert re.search(r"valid .*\| encoder_nfe \d+", log)
    gen = run_in_process(
        "fairseq-generate",
        [
            str(data_bin),
            "--user-dir",
            "user_dir",
            "--path",
            str(tmp_path / "checkpoint_last.pt"),
            "--beam",
            "2",
            "--max-tokens",
            "1000",
            "--gen-subset",
            "valid",
            "--model-overrides",
            "{'encoder_ode_method': 'rk4', 'encoder_ode_steps': 3}",
        ],
        check=True,
    )
    assert len(_hypotheses(gen.stdout)) == 30


# A non-autonomous model, weights θ(τ) from small time networks.
NON_AUTONOMOUS = [
    "--arch",
    "ode_transformer_nonauto_small",
    *TINY_MODEL,
    *TRAIN,
    "--time-features",
    "8",
    "--time-hidden-dim",
    "16",
    "--time-embed-dim",
    "4",
]


def test_non_autonomous_model_adapts_step_count_and_exports_to_plain_fairseq(data_bin, tmp_path):
    run_in_process(
        "fairseq-train",
        [
            str(data_bin),
            *NON_AUTONOMOUS,
            "--max-update",
            "4",
            "--save-dir",
            str(tmp_path),
            "--max-epoch",
            "1",
        ],
        check=True,
    )
    ckpt = str(tmp_path / "checkpoint_last.pt")
    common = [str(data_bin), "--beam", "2", "--max-tokens", "1000", "--gen-subset", "valid"]
    at_four = run_in_process(
        "fairseq-generate",
        [
            *common,
            "--user-dir",
            "user_dir",
            "--path",
            ckpt,
            "--model-overrides",
            "{'encoder_ode_steps': 4, 'decoder_ode_steps': 4}",
        ],
        check=True,
    )
    out = export("--path", ckpt, "--encoder-steps", "4", "--decoder-steps", "4", "--output", str(tmp_path / "plain.pt"))
    assert "exported 4 encoder and 4 decoder layers" in out
    # Plain fairseq: no --user-dir, safe loading on, run from another directory; without the
    # plugin's batching fix, --required-batch-size-multiple 1 keeps fairseq from dropping sentences.
    plain = run(
        "fairseq-generate",
        [*common, "--path", str(tmp_path / "plain.pt"), "--required-batch-size-multiple", "1"],
        cwd=str(tmp_path),
    )
    ode_hyps = re.findall(r"^H-(\d+)\t(\S+)\t(.*)$", at_four.stdout, re.M)
    plain_hyps = re.findall(r"^H-(\d+)\t(\S+)\t(.*)$", plain.stdout, re.M)
    assert len(ode_hyps) == 30
    assert {i: h for i, _, h in ode_hyps} == {i: h for i, _, h in plain_hyps}
    for (_, a, _), (_, b, _) in zip(sorted(ode_hyps), sorted(plain_hyps)):  # 4 + 4 layer evaluations
        assert float(a) == pytest.approx(float(b), abs=score_tolerance([float(b)], 8))


def test_lora_fine_tune_at_a_new_step_count_trains_adapters_and_merges_to_plain_fairseq(data_bin, tmp_path):
    # Step-count adaptation: materialise at N' = 3, fine-tune with LoRA, merge, decode without the plugin.
    run_in_process(
        "fairseq-train",
        [
            str(data_bin),
            *NON_AUTONOMOUS,
            "--time-network",
            "per-weight",
            "--max-update",
            "4",
            "--save-dir",
            str(tmp_path / "ode"),
        ],
        check=True,
    )
    materialised = tmp_path / "plain3.pt"
    export(
        "--path",
        str(tmp_path / "ode" / "checkpoint_last.pt"),
        "--encoder-steps",
        "3",
        "--decoder-steps",
        "3",
        "--output",
        str(materialised),
    )
    run_in_process(
        "fairseq-train",
        [
            str(data_bin),
            "--arch",
            "lora_transformer",
            *TINY_MODEL,
            *TRAIN,
            "--encoder-layers",
            "3",
            "--decoder-layers",
            "3",
            *PRE_NORM,
            "--lora-rank",
            "2",
            "--finetune-from-model",
            str(materialised),
            "--max-update",
            "3",
            "--save-dir",
            str(tmp_path / "lora"),
        ],
        check=True,
    )
    lora = load_checkpoint(str(tmp_path / "lora" / "checkpoint_last.pt"))["model"]
    start = load_checkpoint(str(materialised))["model"]
    adapters = {k: v for k, v in lora.items() if ".lora_" in k}
    assert adapters and any(v.abs().max() > 0 for k, v in adapters.items() if ".lora_B." in k)
    for name, value in start.items():  # every weight of the materialised model is frozen
        module, _, leaf = name.rpartition(".")
        assert torch.equal(lora.get(f"{module}.base_layer.{leaf}", lora.get(name)), value), name
    out = export("--path", str(tmp_path / "lora" / "checkpoint_last.pt"), "--output", str(tmp_path / "merged.pt"))
    assert "exported 3 encoder and 3 decoder layers" in out
    common = [str(data_bin), "--beam", "2", "--max-tokens", "1000", "--gen-subset", "valid"]
    with_adapters = run_in_process(
        "fairseq-generate",
        [*common, "--user-dir", "user_dir", "--path", str(tmp_path / "lora" / "checkpoint_last.pt")],
        check=True,
    )
    merged = run(
        "fairseq-generate",
        [*common, "--path", str(tmp_path / "merged.pt"), "--required-batch-size-multiple", "1"],
        cwd=str(tmp_path),
    )
    assert len(_hypotheses(with_adapters.stdout)) == 30
    assert _hypotheses(merged.stdout) == _hypotheses(with_adapters.stdout)


@pytest.mark.parametrize(
    "options, per_sentence",
    [
        (["--beam", "4", "--nbest", "3", "--prefix-size", "1"], 3),
        (["--beam", "2", "--nbest", "2", "--sampling", "--sampling-topk", "5", "--seed", "3"], 2),
        (["--beam", "3", "--print-alignment"], 1),
    ],
)
def test_generation_options_work_with_rk_decoder_caches(data_bin, trained, options, per_sentence):
    args = subset_args(data_bin, trained / "averaged.pt", "test", "--max-tokens", "1000", *options)
    out = run_in_process("fairseq-generate", args, check=True)
    hyps = re.findall(r"^H-(\d+)\t\S+\t(.*)$", out.stdout, re.M)
    assert len(hyps) == 25 * per_sentence
    if "--prefix-size" in options:
        targets = dict(re.findall(r"^T-(\d+)\t(.*)$", out.stdout, re.M))
        assert all(h.split()[:1] == targets[i].split()[:1] for i, h in hyps)
    if "--print-alignment" in options:
        assert len(re.findall(r"^A-\d+\t(\d+-\d+ ?)+$", out.stdout, re.M)) == 25
