"""ODE language models end to end through fairseq's real CLIs: fairseq-train --task
language_modeling, fairseq-eval-lm with --context-window, fairseq-interactive with sampling,
fairseq-generate on LM data, the hub interface, and export to a plain transformer_lm that fairseq
runs without the plugin. Every tool but the plain fairseq-eval-lm (a console script, to run without
the plugin) runs its entry point in this process (:func:`testkit.in_process.run_in_process`); the
translation tests run the other console scripts."""

from __future__ import annotations

import re

import pytest
import torch
from fairseq.models.transformer_lm import TransformerLanguageModel

from ode_seq.cli.export import main as export_main
from ode_seq.models import ODETransformerLanguageModel
from testkit.in_process import run_in_process
from tests.e2e.cli import run
from tests.e2e.corpus import LM_SIZES
from tests.lm.conftest import TINY_TIME, lm_training_args

PROMPTS = ["w1 w2 w3", "w10 w11 w12"]


def train(data, save, arch, options, *extra) -> None:
    args = lm_training_args(data, arch, options, ["--save-dir", str(save), *extra])
    out = run_in_process("fairseq-train", args, check=True)
    assert re.search(r"done training", out.stdout + out.stderr)


@pytest.fixture(scope="module")
def trained(lm_data, tmp_path_factory):
    """``ode_transformer_lm_rk2_learned_gpt2_tiny`` at its own size, 4 epochs."""
    save = tmp_path_factory.mktemp("lm_ckpt")
    sizes = dict(decoder_embed_dim=64, decoder_ffn_embed_dim=64, decoder_attention_heads=1, decoder_layers=2)
    train(lm_data, save, "ode_transformer_lm_rk2_learned_gpt2_tiny", sizes, "--max-epoch", "4", "--lr", "0.003")
    return save / "checkpoint_last.pt"


def eval_lm(data, checkpoint, *extra, cwd=None) -> tuple:
    """(tokens evaluated, loss in bits, perplexity) of fairseq-eval-lm on the test split: its entry
    point in this process, or with ``cwd`` its console script run there."""
    args = [str(data), "--path", str(checkpoint), "--gen-subset", "test", "--max-tokens", "512", *extra]
    out = run("fairseq-eval-lm", args, cwd=cwd) if cwd else run_in_process("fairseq-eval-lm", args, check=True)
    log = out.stdout + out.stderr
    tokens = int(re.search(r"Evaluated (\d+) tokens", log).group(1))
    loss, perplexity = re.search(r"Loss \(base 2\): ([\d.]+), Perplexity: ([\d.]+)", log).groups()
    return tokens, float(loss), float(perplexity)


def decoding_args(data, checkpoint, *options: str) -> list:
    """fairseq-interactive's or fairseq-generate's command line for an LM checkpoint."""
    return [str(data), "--task", "language_modeling", "--user-dir", "user_dir", "--path", str(checkpoint), *options]


def _hypotheses(stdout: str) -> dict:
    return {int(i): h for i, h in re.findall(r"^H-(\d+)\t\S+\t(.*)$", stdout, re.M)}


def test_interactive_samples_continuations_of_stdin_prompts(lm_data, trained):
    sampling = ("--sampling", "--sampling-topk", "5", "--beam", "1", "--seed", "3", "--max-len-b", "12")
    stdin = "".join(p + "\n" for p in PROMPTS)
    out = run_in_process(
        "fairseq-interactive", decoding_args(lm_data, trained, *sampling, "--min-len", "5"), stdin=stdin, check=True
    )
    hypotheses = _hypotheses(out.stdout)
    assert sorted(hypotheses) == [0, 1]
    for i, prompt in enumerate(PROMPTS):
        assert hypotheses[i].startswith(prompt + " ") and len(hypotheses[i].split()) >= 5


def test_generate_continues_every_test_line(lm_data, trained):
    search = ("--sample-break-mode", "eos", "--beam", "2", "--max-len-b", "24", "--max-tokens", "512")
    out = run_in_process(
        "fairseq-generate", decoding_args(lm_data, trained, "--gen-subset", "test", *search), check=True
    )
    hypotheses = _hypotheses(out.stdout)
    sources = {int(i): s for i, s in re.findall(r"^S-(\d+)\t(.*)$", out.stdout, re.M)}
    assert sorted(hypotheses) == list(range(LM_SIZES["test"])) and hypotheses.keys() == sources.keys()
    assert all(hypotheses[i].startswith(sources[i]) for i in hypotheses)


def test_hub_interface_samples_and_scores_as_fairseqs_transformer_lm_class(trained, lm_data):
    hubs = [
        model_class.from_pretrained(str(trained.parent), checkpoint_file=trained.name, data_name_or_path=str(lm_data))
        for model_class in (ODETransformerLanguageModel, TransformerLanguageModel)
    ]
    assert type(hubs[1].models[0]).__name__ == "ODETransformerLanguageModel"
    beam = hubs[0].sample("w1 w2", beam=2, max_len_b=8, min_len=4).split()
    torch.manual_seed(0)
    sample = hubs[1].sample("w1 w2", beam=1, sampling=True, sampling_topk=5, max_len_b=8, min_len=4).split()
    for words in (beam, sample):
        assert words[:2] == ["w1", "w2"] and len(words) >= 4
    scores = [hub.score("w1 w2 w3 w4")["positional_scores"] for hub in hubs]
    assert len(scores[0]) == 4 and torch.equal(*scores) and torch.isfinite(scores[0]).all()  # one score per word


def test_non_autonomous_lm_evaluates_with_a_context_window_and_exports_to_a_plain_transformer_lm(lm_data, tmp_path):
    train(lm_data, tmp_path, "ode_transformer_lm_nonauto", TINY_TIME, "--max-epoch", "4", "--lr", "0.003")
    checkpoint = tmp_path / "checkpoint_last.pt"
    out = run_in_process(
        "python",
        [
            "-m",
            "ode_seq.cli.export",
            "--path",
            str(checkpoint),
            "--decoder-steps",
            "3",
            "--output",
            str(tmp_path / "plain.pt"),
        ],
        check=True,
    )
    assert "exported 3 decoder layers" in out.stdout
    window = ("--tokens-per-sample", "16", "--context-window", "8")
    ode = eval_lm(
        lm_data, checkpoint, "--user-dir", "user_dir", "--model-overrides", "{'decoder_ode_steps': 3}", *window
    )
    lines = (lm_data.parent / "test.txt").read_text().splitlines()
    assert ode[0] == sum(len(line.split()) + 1 for line in lines)  # every word and every eos scored
    assert 1 < ode[2] < 24  # uniform over the 24 words would be 24: the successor rule is learnt
    plain = eval_lm(lm_data, tmp_path / "plain.pt", *window, cwd=str(tmp_path))  # no plugin, safe loading on
    assert plain[0] == ode[0] and plain[1] == pytest.approx(ode[1], abs=1e-4)


@pytest.mark.parametrize(
    "extra, refusal",
    [
        (["--encoder-steps", "3"], "a language model has no encoder"),
        (["--to", "ctranslate2"], "heun (--decoder-ode-method)"),
        (["--decoder-steps", "3"], "--decoder-steps applies to language models of the time-dependent layer kind"),
    ],
)
def test_export_refuses_options_a_language_model_does_not_have(trained, tmp_path, capsys, extra, refusal):
    assert export_main(["--path", str(trained), "--output", str(tmp_path / "out"), *extra]) == 1
    assert refusal in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []
