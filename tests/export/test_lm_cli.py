"""``python -m ode_seq.cli.export`` on language-model checkpoints (saved by fairseq's Trainer):
``--to ctranslate2`` gives a CTranslate2 Generator with fairseq's log-probabilities and
hypotheses, ``--to hf`` an XGLM folder (custom code where the model is not a Transformer) whose
``generate()`` with the saved generation config gives fairseq-generate's (in a process without
fairseq or ode-seq), and what a target cannot hold exits 1 naming the option, with nothing left
behind."""

import json
import re

import pytest
import torch
from fairseq import checkpoint_utils

from ode_seq.cli.export import main
from ode_seq.export.hf_tokenizer import FairseqTokenizer  # the folder's fairseq_tokenizer.py
from tests.e2e.cli import run
from tests.export.models import language_model_checkpoint, lm_hypotheses
from tests.lm.conftest import TINY_TIME
from tests.numerics import LayerEvaluations, assert_equal_up_to_rounding, score_tolerance


def _symbols(model, ids):
    return [model.decoder.dictionary[i] for i in ids]


@pytest.mark.numerics
def test_euler_lm_to_ctranslate2_gives_fairseqs_log_probabilities_and_hypotheses(tmp_path):
    import ctranslate2

    checkpoint, model = language_model_checkpoint(tmp_path / "data", "ode_transformer_lm_euler", end_early=True)
    assert main(["--to", "ctranslate2", "--path", str(checkpoint), "--output", str(tmp_path / "ct2")]) == 0
    generator = ctranslate2.Generator(str(tmp_path / "ct2"), device="cpu", intra_threads=1)
    tokens = torch.tensor([[2, 5, 9, 7, 11, 6, 30, 8]])
    with torch.no_grad(), LayerEvaluations(model) as evaluations:
        expected = model.get_normalized_probs(model(tokens), log_probs=True)[0, :-1]
    expected = expected.gather(-1, tokens[0, 1:, None])[:, 0]
    scored = generator.score_batch([_symbols(model, tokens[0].tolist())])[0]
    assert scored.tokens == _symbols(model, tokens[0, 1:].tolist())
    assert_equal_up_to_rounding(torch.tensor(scored.log_probs), expected, evaluations.count)
    # fairseq's --min-len 1 counts from the start token: CTranslate2's min_length 1 without a prompt
    for prompt, beam in (([], 1), ([], 4), ([5, 9, 7], 1), ([5, 9, 7], 4)):
        best = lm_hypotheses(model, prompt, beam, 1.0, 20)[0]
        result = generator.generate_batch(
            [_symbols(model, [2, *prompt])],
            beam_size=beam,
            max_length=22,
            min_length=0 if prompt else 1,
            return_end_token=True,
        )[0]
        assert result.sequences[0] == _symbols(model, best["tokens"].tolist())


GENERATE_OFFLINE = """
import json, sys
from fairseq_tokenizer import FairseqTokenizer
from transformers import AutoModelForCausalLM
tokenizer = FairseqTokenizer(sys.argv[1])
model = AutoModelForCausalLM.from_pretrained(sys.argv[1], trust_remote_code=True).eval()
out = model.generate(**tokenizer.prompts([""]), return_dict_in_generate=True, output_scores=True)
loaded = sorted(m for m in sys.modules if m.split(".")[0] in ("fairseq", "ode_seq"))
print(json.dumps({"ids": out.sequences[0].tolist(), "text": tokenizer.decode(out.sequences)[0],
                  "score": out.sequences_scores[0].item(), "loaded": loaded, "class": type(model).__name__}))
"""


@pytest.mark.parametrize(
    "arch, model_class, remote_code",
    [
        ("ode_transformer_lm_euler", "XGLMForCausalLM", False),
        ("ode_transformer_lm_rk2_learned", "ODEXGLMForCausalLM", True),
        ("ode_transformer_lm_pcformer", "ODEXGLMForCausalLM", True),  # predictor-corrector blocks
    ],
)
def test_lm_to_hf_generates_fairseq_generates_hypothesis_offline_with_the_saved_config(
    tmp_path, arch, model_class, remote_code
):
    """In a process that imports neither fairseq nor ode-seq, the folder's tokenizer and model with
    the saved generation config give fairseq-generate's hypothesis (defaults: --beam 5 --lenpen 1
    --max-len-b 200 --min-len 1, from </s>) and its score."""
    checkpoint, model = language_model_checkpoint(tmp_path / "data", arch, end_early=True)
    folder = tmp_path / "hf"
    assert main(["--to", "hf", "--path", str(checkpoint), "--output", str(folder)]) == 0
    assert ("auto_map" in json.loads((folder / "config.json").read_text())) == remote_code
    environment = {"PYTHONPATH": str(folder), "HF_MODULES_CACHE": str(tmp_path / "modules")}
    out = run("python", ["-c", GENERATE_OFFLINE, str(folder)], cwd=str(tmp_path), env=environment)
    result = json.loads(out.stdout.splitlines()[-1])
    assert result["loaded"] == [] and result["class"] == model_class
    best = lm_hypotheses(model, [], 5, 1.0, 200)[0]
    assert result["ids"][1 : len(best["tokens"]) + 1] == best["tokens"].tolist()
    assert result["text"] == " ".join(_symbols(model, best["tokens"][:-1].tolist()))
    with LayerEvaluations(model) as evaluations, torch.no_grad():
        model(torch.tensor([[2]]))
    tolerance = score_tolerance([best["score"].item()], evaluations.count * len(best["tokens"]))
    assert abs(result["score"] - best["score"].item()) <= tolerance


@pytest.mark.numerics
def test_nonautonomous_lm_to_hf_is_xglm_at_the_steps_asked_with_the_moses_tokenizer(tmp_path):
    """``--decoder-steps 3``: XGLM with 3 layers and the log-probabilities of the model at 3 steps;
    ``--tokenizer moses``: the folder's tokenizer Moses-(de)tokenises English, prompts from </s>."""
    from transformers import AutoModelForCausalLM

    time = [f"--{k.replace('_', '-')}={v}" for k, v in TINY_TIME.items()]
    checkpoint, _ = language_model_checkpoint(tmp_path / "data", "ode_transformer_lm_nonauto", *time)
    folder = tmp_path / "hf"
    export = ["--to", "hf", "--path", str(checkpoint), "--decoder-steps", "3", "--tokenizer", "moses"]
    assert main([*export, "--output", str(folder)]) == 0
    settings = json.loads((folder / "fairseq_tokenizer.json").read_text())
    expected = {"tokenizer": "moses", "source_lang": "en", "target_lang": "en", "prompt_start": 2, "max_positions": 64}
    assert settings == {**expected, "moses_no_dash_splits": False, "moses_no_escape": False}
    hf = AutoModelForCausalLM.from_pretrained(str(folder)).eval()
    assert type(hf).__name__ == "XGLMForCausalLM" and hf.config.num_layers == 3
    (model,), _, _ = checkpoint_utils.load_model_ensemble_and_task(
        [str(checkpoint)], arg_overrides={"decoder_ode_steps": 3}
    )
    tokens = torch.tensor([[2, 5, 9, 7, 11, 6, 30, 8]])
    with torch.no_grad():
        expected = model.eval().get_normalized_probs(model(tokens), log_probs=True)
        with LayerEvaluations(hf) as evaluations:
            got = hf(input_ids=tokens).logits.log_softmax(-1)
    assert_equal_up_to_rounding(got, expected, evaluations.count)
    tokenizer = FairseqTokenizer(str(folder))
    assert tokenizer.prompts(["w1 w5"])["input_ids"].tolist() == [[2, 5, 9]]
    assert tokenizer.decode(torch.tensor([[2, 5, 9, 2]])) == ["w1 w5"]


@pytest.mark.parametrize(
    "arch, options, target, refusal",
    [
        ("ode_transformer_lm_rk2", [], "ctranslate2", r"heun \(--decoder-ode-method\).*--to hf \(custom code\)"),
        ("ode_transformer_lm_parallel", [], "ctranslate2", r"--ode-field parallel-branch"),
        ("stable_ode_transformer_lm", [], "hf", r"stable layers"),
        ("ode_transformer_lm_rk2", ["--ode-scope", "sublayer"], "hf", r"--ode-scope sublayer"),
        ("ode_transformer_lm_euler", ["--no-decoder-final-norm"], "hf", r"--no-decoder-final-norm.*--to fairseq"),
    ],
)
def test_what_a_target_cannot_hold_exits_1_naming_the_option(tmp_path, capsys, arch, options, target, refusal):
    checkpoint, _ = language_model_checkpoint(tmp_path / "data", arch, *options)
    capsys.readouterr()  # what building the checkpoint printed
    assert main(["--to", target, "--path", str(checkpoint), "--output", str(tmp_path / "out" / "model")]) == 1
    error = capsys.readouterr().err
    assert error.startswith("export: error:") and re.search(refusal, error), error
    assert list((tmp_path / "out").iterdir()) == []
