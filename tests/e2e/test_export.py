"""Export through the real CLIs: a tiny Euler model trained by fairseq-train, exported to a plain
fairseq checkpoint, CTranslate2 and Hugging Face M2M100, translates the same in each. The tools
with the plugin run their entry points in this process (:func:`testkit.in_process.run_in_process`);
what must run without it (plain fairseq-generate, the Hugging Face folder) runs in a process of its own."""

from __future__ import annotations

import math
import re

import pytest

from testkit.in_process import run_in_process
from tests.e2e.cli import TINY_MODEL, TRANSLATION_TRAINING, export, run
from tests.e2e.corpus import CLI_SIZES, reversal_data_bin
from tests.numerics import score_tolerance

# 40 epochs at learning rate 0.005 (warm-up 10 updates, no dropout), no validation, the last checkpoint.
TRAIN = [
    *TRANSLATION_TRAINING,
    "--lr",
    "0.005",
    "--lr-scheduler",
    "inverse_sqrt",
    "--warmup-updates",
    "10",
    "--dropout",
    "0",
    "--label-smoothing",
    "0.1",
    "--max-tokens",
    "1000",
    "--max-epoch",
    "40",
    "--disable-validation",
    "--no-epoch-checkpoints",
]
BEAM = ["--beam", "4", "--lenpen", "0.6"]


@pytest.fixture(scope="module")
def data_bin(tmp_path_factory):
    return reversal_data_bin(tmp_path_factory.mktemp("raw"), CLI_SIZES)


def _train(data_bin, save, *arch):
    """(data-bin, checkpoint) of ``arch`` trained with :data:`TRAIN`."""
    run_in_process(
        "fairseq-train", [str(data_bin), "--arch", *arch, *TINY_MODEL, *TRAIN, "--save-dir", str(save)], check=True
    )
    return data_bin, save / "checkpoint_last.pt"


@pytest.fixture(scope="module")
def trained(data_bin, tmp_path_factory):
    """(data-bin, checkpoint) of an Euler ODE Transformer whose encoder is one layer shared over
    [0, 2] in 2 steps, trained 40 epochs (160 updates) on the reversal corpus."""
    return _train(
        data_bin, tmp_path_factory.mktemp("ckpt"), "ode_transformer_euler_small", "--encoder-share-group-size", "2"
    )


@pytest.fixture(scope="module")
def trained_rk2(data_bin, tmp_path_factory):
    """(data-bin, checkpoint) of the paper's RK2 encoder with the learned gate, plain decoder."""
    return _train(data_bin, tmp_path_factory.mktemp("ckpt"), "ode_transformer_rk2_learned_small")


@pytest.fixture(scope="module")
def trained_rk2_decoder(data_bin, tmp_path_factory):
    """(data-bin, checkpoint) of RK2 encoder and decoder blocks with learned gates."""
    return _train(
        data_bin, tmp_path_factory.mktemp("ckpt"), "ode_transformer_rk2_learned_small", "--decoder-ode-method", "heun"
    )


def hypotheses(stdout: str):
    """{sentence id: (score, hypothesis)} of fairseq-generate's H- lines."""
    return {int(i): (float(s), h) for i, s, h in re.findall(r"^H-(\d+)\t(\S+)\t(.*)$", stdout, re.M)}


def positional_scores(stdout: str):
    return {int(i): [float(x) for x in s.split()] for i, s in re.findall(r"^P-(\d+)\t(.*)$", stdout, re.M)}


def sources(stdout: str):
    return {int(i): s for i, s in re.findall(r"^S-(\d+)\t(.*)$", stdout, re.M)}


def generate(data_bin, path, plugin_free_in=None):
    """fairseq-generate with the plugin, in this process; or with ``plugin_free_in`` (a folder),
    its console script run there without the plugin."""
    args = [str(data_bin), "--path", str(path), *BEAM, "--max-tokens", "1000", "--gen-subset", "test"]
    if plugin_free_in:
        return run("fairseq-generate", [*args, "--required-batch-size-multiple", "1"], cwd=plugin_free_in)
    return run_in_process("fairseq-generate", [*args, "--user-dir", "user_dir"], check=True)


def test_plain_fairseq_without_the_plugin_and_ctranslate2_translate_as_the_ode_model(trained, tmp_path):
    import ctranslate2

    data_bin, ckpt = trained
    ode = generate(data_bin, ckpt)
    out = export("--to", "fairseq", "--path", str(ckpt), "--output", str(tmp_path / "plain.pt"))
    assert "exported 2 encoder and 2 decoder layers" in out
    plain = generate(data_bin, tmp_path / "plain.pt", plugin_free_in=str(tmp_path))
    expected, positional = hypotheses(ode.stdout), positional_scores(ode.stdout)
    assert len(expected) == CLI_SIZES["test"]
    assert {i: h for i, (_, h) in hypotheses(plain.stdout).items()} == {i: h for i, (_, h) in expected.items()}
    for i, (score, _) in hypotheses(plain.stdout).items():  # 2 + 2 layer evaluations
        assert score == pytest.approx(expected[i][0], abs=score_tolerance([expected[i][0]], 4))

    export("--to", "ctranslate2", "--path", str(ckpt), "--output", str(tmp_path / "ct2"))
    translator = ctranslate2.Translator(str(tmp_path / "ct2"), device="cpu", intra_threads=1)
    order = sorted(expected)
    src, hyps = sources(ode.stdout), [expected[i][1].split() for i in order]
    results = translator.translate_batch(
        [src[i].split() for i in order], beam_size=4, length_penalty=0.6, max_decoding_length=200
    )
    assert [r.hypotheses[0] for r in results] == hyps
    # The model itself is exact: CTranslate2's token log-probabilities are fairseq's (P- lines, base 2).
    scored = translator.score_batch([src[i].split() for i in order], hyps)
    for i, result in zip(order, scored):  # P- lines: 4 decimals
        tolerance = score_tolerance(positional[i], 4, decimals=4)
        assert [x / math.log(2) for x in result.log_probs] == pytest.approx(positional[i], abs=tolerance)


TRANSLATE_OFFLINE = """
import json, sys
sys.path.insert(0, sys.argv[1])
from fairseq_tokenizer import FairseqTokenizer
from transformers import AutoModelForSeq2SeqLM
tokenizer = FairseqTokenizer(sys.argv[1])
model = AutoModelForSeq2SeqLM.from_pretrained(sys.argv[1], trust_remote_code=True).eval()
texts = json.loads(sys.stdin.read())
out = model.generate(**tokenizer(texts), return_dict_in_generate=True, output_scores=True)
loaded = sorted(m for m in sys.modules if m.split(".")[0] in ("fairseq", "ode_seq"))
print(json.dumps({"hypotheses": tokenizer.decode(out.sequences), "scores": out.sequences_scores.tolist(),
                  "loaded": loaded, "class": type(model).__name__}))
"""


@pytest.mark.parametrize(
    "model, hf_class, evaluations",
    [
        ("trained", "M2M100ForConditionalGeneration", 4),
        ("trained_rk2", "ODEM2M100ForConditionalGeneration", 6),  # custom code: RK2 encoder, learned gate
        ("trained_rk2_decoder", "ODEM2M100ForConditionalGeneration", 8),  # and RK2 decoder blocks
    ],
)
def test_hugging_face_folder_translates_offline_as_fairseq_generate(request, tmp_path, model, hf_class, evaluations):
    import json

    data_bin, ckpt = request.getfixturevalue(model)
    ode = generate(data_bin, ckpt)
    export("--to", "hf", "--path", str(ckpt), "--output", str(tmp_path / "hf"))
    assert (tmp_path / "hf" / "model.safetensors").exists()
    expected, src = hypotheses(ode.stdout), sources(ode.stdout)
    order = sorted(expected)
    out = run(
        "python",
        ["-c", TRANSLATE_OFFLINE, str(tmp_path / "hf")],
        cwd=str(tmp_path),
        stdin=json.dumps([src[i] for i in order]),
        env={"HF_MODULES_CACHE": str(tmp_path / "modules")},
    )
    result = json.loads(out.stdout.splitlines()[-1])
    assert result["loaded"] == [] and result["class"] == hf_class
    assert result["hypotheses"] == [expected[i][1] for i in order]
    for score, i in zip(result["scores"], order):  # fairseq prints base-2 scores
        assert score / math.log(2) == pytest.approx(expected[i][0], abs=score_tolerance([expected[i][0]], evaluations))
