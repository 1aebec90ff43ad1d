"""A model's maximum positions hold in every tool that runs it (issue 45, item 2): fairseq stops a
language model's generation at its positions and refuses a longer prompt (fairseq-interactive), and
so do the exported Hugging Face models with their saved generation config and tokenizer;
fairseq-eval-lm refuses what it would score over a subset of the text or past the positions;
CTranslate2 refuses positions past the model's.

Models are untrained and tiny, saved by fairseq's Trainer as fairseq-train saves them; to make
generation run to its length cap, :func:`never_ending` makes </s> the least likely word."""

from __future__ import annotations

import re
from pathlib import Path
from typing import List

import pytest
import torch
from fairseq import checkpoint_utils

from ode_seq.checkpoint_files import load_checkpoint, save_checkpoint
from ode_seq.cli.export import main as export
from ode_seq.export.hf_tokenizer import FairseqTokenizer
from testkit.in_process import run_in_process
from tests.export.models import language_model_checkpoint, lm_hypotheses
from tests.reliability import mismatch_data as md

POSITIONS = 32  # the language models' --tokens-per-sample, so their positions
TEST_TOKENS = 157  # the tokens of the LM corpus's test split (its lines' words and line ends)


def never_ending(checkpoint: Path, output_projection: str) -> None:
    """Rewrite ``checkpoint`` so that every position's decoder output is one unit vector u (the final
    LayerNorm's weight 0, its bias u) and the output row of </s> is -4·u: </s> is never chosen, every
    step chooses the same word, and generation runs to its length cap."""
    state = load_checkpoint(str(checkpoint))
    model = state["model"]
    u = torch.randn(model["decoder.layer_norm.bias"].shape, generator=torch.Generator().manual_seed(0))
    u /= u.norm()
    model["decoder.layer_norm.weight"].zero_()
    model["decoder.layer_norm.bias"].copy_(u)
    model[output_projection][2] = -4.0 * u
    save_checkpoint(state, str(checkpoint))


@pytest.fixture(scope="module")
def language_model(lm_data, tmp_path_factory) -> Path:
    """fairseq's ``transformer_lm`` of 32 positions."""
    return md.save(lm_data, tmp_path_factory.mktemp("lm") / "lm.pt", md.LANGUAGE_MODEL)


@pytest.fixture(scope="module")
def exported_lm(tmp_path_factory):
    """(checkpoint, its Hugging Face folder) of an Euler ODE LM of 32 positions that never ends a sentence."""
    directory = tmp_path_factory.mktemp("exported_lm")
    checkpoint, _ = language_model_checkpoint(
        directory / "data", "ode_transformer_lm_euler", "--tokens-per-sample", "32"
    )
    never_ending(checkpoint, "decoder.output_projection.weight")
    assert export(["--to", "hf", "--path", str(checkpoint), "--output", str(directory / "hf")]) == 0
    return checkpoint, directory / "hf"


def eval_lm(data: Path, checkpoint: Path, *options: str):
    args = [str(data), "--user-dir", "user_dir", "--path", str(checkpoint), "--gen-subset", "test", "--cpu", *options]
    return run_in_process("fairseq-eval-lm", [*args, "--num-workers", "0"])


@pytest.mark.parametrize(
    "options, refusal",
    [
        (
            ["--tokens-per-sample", "64"],
            "--tokens-per-sample 64 gives the model up to 64 tokens at once, but the model has 32 positions "
            "(--max-target-positions): fairseq-eval-lm would skip the 2 of 3 samples longer than that (128 of its "
            "157 tokens) and report the perplexity of the rest; pass --tokens-per-sample 32 or less",
        ),
        (
            ["--tokens-per-sample", "64", "--context-window", "32"],
            "--tokens-per-sample 64 with --context-window 32 gives the model up to 64 tokens at once, but the model "
            "has 32 positions (--max-target-positions): the model would read positions it was never trained on; "
            "pass --tokens-per-sample 32 or less (and a --context-window below it)",
        ),
    ],
    ids=["blocks-longer-than-the-positions", "blocks-with-their-context-longer-than-the-positions"],
)
def test_eval_lm_refuses_samples_longer_than_the_models_positions(lm_data, language_model, options, refusal):
    result = eval_lm(lm_data, language_model, *options)
    assert result.returncode == 1
    assert refusal in result.stderr
    assert "Perplexity" not in result.stdout + result.stderr


def test_eval_lm_refuses_whole_lines_longer_than_the_models_positions(lm_data, tmp_path):
    """--sample-break-mode eos scores each line in one piece: a model of 8 positions cannot read the
    lines of up to 13 tokens (fairseq skipped them and scored the short ones)."""
    short = md.save(lm_data, tmp_path / "short.pt", [*md.LANGUAGE_MODEL, "--tokens-per-sample", "8"])
    result = eval_lm(lm_data, short, "--tokens-per-sample", "8", "--sample-break-mode", "eos")
    assert result.returncode == 1
    assert (
        "the longest sample holds 13 tokens (its --sample-break-mode keeps lines whole), but the model has 8 "
        "positions (--max-target-positions): fairseq-eval-lm would skip the" in result.stderr
    )
    assert "pass --sample-break-mode none --tokens-per-sample 8, which cuts the text into blocks" in result.stderr


@pytest.mark.parametrize(
    "options", [["--tokens-per-sample", "32"], ["--tokens-per-sample", "32", "--context-window", "16"]]
)
def test_eval_lm_within_the_positions_scores_every_token(lm_data, language_model, options):
    result = eval_lm(lm_data, language_model, *options)
    assert result.returncode == 0, result.stderr[-2000:]
    assert f"Evaluated {TEST_TOKENS} tokens" in result.stdout  # its log


def fairseq_words(checkpoint: Path, prompt: List[int]) -> List[int]:
    """The words of fairseq's best continuation of ``prompt`` (the generator fairseq-interactive runs,
    its defaults: --beam 5 --max-len-b 200), its </s> left out."""
    (model,), _, _ = checkpoint_utils.load_model_ensemble_and_task([str(checkpoint)])
    tokens = lm_hypotheses(model.eval(), prompt, 5, 1.0, 200)[0]["tokens"].tolist()
    assert tokens[-1] == 2
    return tokens[:-1]


@pytest.mark.parametrize("prompt_words", [0, POSITIONS - 2, POSITIONS - 1])
def test_exported_lm_with_its_saved_config_stops_where_fairseq_stops(exported_lm, prompt_words):
    """fairseq generates at most positions − 1 tokens before its forced </s> (the model reads at most
    its 32 positions); generate() with the saved config stops at the same length (one token more, where
    fairseq forces </s>). Before: the saved config let generate() run to 202 tokens."""
    from transformers import AutoModelForCausalLM

    checkpoint, folder = exported_lm
    prompt = [5] * prompt_words
    expected = fairseq_words(checkpoint, prompt)
    assert len(expected) == POSITIONS - 1  # fairseq stopped at its cap
    hf = AutoModelForCausalLM.from_pretrained(str(folder)).eval()
    with torch.no_grad():
        sequence = hf.generate(input_ids=torch.tensor([[2, *prompt]]))[0].tolist()
    assert len(sequence) == POSITIONS + 1
    assert sequence[1:POSITIONS] == expected


def test_exported_lm_refuses_a_prompt_longer_than_its_positions(exported_lm):
    """fairseq-interactive refuses a prompt of 32 words (33 tokens with its start token) and takes one
    of 31; the folder's tokenizer and generate() with the saved config refuse and take the same."""
    checkpoint, folder = exported_lm
    from transformers import AutoModelForCausalLM

    longest, too_long = " ".join(["w1"] * (POSITIONS - 1)), " ".join(["w1"] * POSITIONS)
    interactive = [str(checkpoint.parent), "--task", "language_modeling", "--user-dir", "user_dir", "--cpu"]
    refused = run_in_process("fairseq-interactive", [*interactive, "--path", str(checkpoint)], stdin=too_long + "\n")
    assert refused.returncode == 1 and "Size of sample #0 is invalid (=33) since max_positions=32" in refused.stderr
    tokenizer = FairseqTokenizer(str(folder))
    assert tokenizer.prompts([longest])["input_ids"].shape == (1, POSITIONS)
    with pytest.raises(ValueError) as refusal:
        tokenizer.prompts([too_long])
    assert "takes 33 tokens with its start token, but the model has 32 positions" in str(refusal.value)
    assert "shorten it to at most 31 tokens" in str(refusal.value)
    hf = AutoModelForCausalLM.from_pretrained(str(folder)).eval()
    with pytest.raises(ValueError, match="Input length of input_ids is 33, but `max_length` is set to 33"):
        hf.generate(input_ids=torch.tensor([[2] + [5] * POSITIONS]))


def test_exported_translation_model_stops_at_its_target_positions_and_refuses_longer_sources(data_bin, tmp_path):
    """--max-source-positions 16 --max-target-positions 16: fairseq-interactive translates at most 15
    words and </s>, and refuses a source of 16 words (17 tokens with its </s>); the M2M100 folder with
    its saved config generates the same 15 words (and one where fairseq forces </s>), its tokenizer
    refuses the same source. Before: generate() ran to 202 tokens."""
    from transformers import M2M100ForConditionalGeneration

    positions = ["--max-source-positions", "16", "--max-target-positions", "16"]
    checkpoint = md.save(data_bin, tmp_path / "transformer.pt", md.TRANSLATION + md.TRANSFORMER + positions)
    never_ending(checkpoint, "encoder.embed_tokens.weight")
    assert export(["--to", "hf", "--path", str(checkpoint), "--output", str(tmp_path / "hf")]) == 0
    interactive = [
        str(data_bin),
        "--user-dir",
        "user_dir",
        "--path",
        str(checkpoint),
        "--cpu",
        "-s",
        "src",
        "-t",
        "tgt",
    ]
    translated = run_in_process("fairseq-interactive", interactive, stdin="w1 w2 w3\n" + " ".join(["w1"] * 16) + "\n")
    assert re.search(
        r"Size of sample #0 is invalid \(=\((np.int64\()?17\)?, 0\)\) since max_positions=\(16, 16\)", translated.stderr
    )
    hypothesis = next(line for line in translated.stdout.splitlines() if line.startswith("H-0"))
    words = hypothesis.split("\t")[2].split()
    assert len(words) == 15
    tokenizer = FairseqTokenizer(str(tmp_path / "hf"))
    with pytest.raises(ValueError, match="takes 17 tokens with its </s>, but the model has 16 positions"):
        tokenizer([" ".join(["w1"] * 16)])
    hf = M2M100ForConditionalGeneration.from_pretrained(str(tmp_path / "hf")).eval()
    with torch.no_grad():
        sequence = hf.generate(**tokenizer(["w1 w2 w3"]))[0]
    assert len(sequence) == 17
    assert tokenizer.decode(sequence[None, :16])[0].split() == words


def test_ctranslate2_refuses_positions_past_the_models(exported_lm, tmp_path):
    """A CTranslate2 Generator holds the model's 32 position encodings and refuses a longer input or
    generation, naming the limit (it cannot stop there by itself: CTranslate2 keeps no generation config)."""
    import ctranslate2

    checkpoint, _ = exported_lm
    assert export(["--to", "ctranslate2", "--path", str(checkpoint), "--output", str(tmp_path / "ct2")]) == 0
    generator = ctranslate2.Generator(str(tmp_path / "ct2"), device="cpu", intra_threads=1)
    fits = generator.generate_batch([["</s>"]], max_length=POSITIONS, beam_size=1)[0]
    assert len(fits.sequences[0]) == POSITIONS
    with pytest.raises(RuntimeError, match="No position encodings are defined for positions >= 32"):
        generator.generate_batch([["</s>"]], max_length=POSITIONS + 1, beam_size=1)
