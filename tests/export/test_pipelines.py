"""Every kind of folder ``--to hf`` writes (XGLM, M2M100, and the custom code of Runge–Kutta and
predictor–corrector models) loads the usual way, in a process where neither ode-seq nor fairseq can
be imported: ``AutoTokenizer.from_pretrained(folder, trust_remote_code=True)`` encodes and decodes
as the folder's own class, and transformers' ``pipeline("text-generation")`` (language models) and
``pipeline("translation")`` (the folder's own, transformers 5 has none) give the text of the
folder's ``generate()`` with its saved config, fairseq's hypothesis."""

import json

import pytest
import torch
from fairseq.sequence_generator import SequenceGenerator

from ode_seq.cli.export import main
from ode_seq.export import m2m100, ode_m2m100, plain_transformer
from ode_seq.export.hf_tokenizer import FairseqTokenizer  # the folder's fairseq_tokenizer.py
from tests.conftest import TinyTask
from tests.e2e.cli import run
from tests.export.models import end_sentences_early, language_model_checkpoint, lm_hypotheses, model_and_args

PROMPT, SOURCE = "w1 w5", "w1 w5 w7 w2"
LANGUAGE_MODELS = {  # kind: (arch, the model class transformers loads)
    "xglm": ("ode_transformer_lm_euler", "XGLMForCausalLM"),
    "ode_xglm_rk2": ("ode_transformer_lm_rk2_learned", "ODEXGLMForCausalLM"),
    "ode_xglm_pcformer": ("ode_transformer_lm_pcformer", "ODEXGLMForCausalLM"),
}
TRANSLATION_MODELS = {
    "m2m100": ("ode_transformer_euler_small", "M2M100ForConditionalGeneration"),
    "ode_m2m100_rk2": ("ode_transformer_rk2_learned_small", "ODEM2M100ForConditionalGeneration"),
    "ode_m2m100_pcformer": ("pcformer_small", "ODEM2M100ForConditionalGeneration"),
}
OFFLINE = """
import json, sys
sys.modules.update({"ode_seq": None, "fairseq": None})  # importing either fails
from transformers import AutoModelForCausalLM, AutoModelForSeq2SeqLM, AutoTokenizer, pipeline
results = {}
for kind, (folder, task, text) in json.loads(sys.stdin.read()).items():
    tokenizer = AutoTokenizer.from_pretrained(folder, trust_remote_code=True)
    auto = AutoModelForCausalLM if task == "text-generation" else AutoModelForSeq2SeqLM
    model = auto.from_pretrained(folder, trust_remote_code=True).eval()
    inputs = tokenizer([text], return_tensors="pt")
    generated = model.generate(**inputs)[0]
    key = "generated_text" if task == "text-generation" else "translation_text"
    run = pipeline(task, model=folder, trust_remote_code=True)
    results[kind] = {
        "classes": [type(tokenizer).__name__, type(model).__name__],
        "ids": inputs["input_ids"][0].tolist(),
        "decoded": tokenizer.decode(inputs["input_ids"][0], skip_special_tokens=True),
        "generated": generated.tolist(),
        "generated_text": tokenizer.decode(generated, skip_special_tokens=True),
        "pipeline_text": run(text)[0][key],
        "pipeline_texts": [r[0][key] if task == "text-generation" else r[key] for r in run([text, text])],
    }
print(json.dumps(results))
"""


def _language_model_folder(directory, arch):
    """(folder, the fairseq model, fairseq's best hypothesis continuing ``PROMPT``: fairseq-generate's
    defaults, the saved generation config's)."""
    checkpoint, model = language_model_checkpoint(directory / "data", arch, end_early=True)
    folder = directory / "hf"
    assert main(["--to", "hf", "--path", str(checkpoint), "--tokenizer", "moses", "--output", str(folder)]) == 0
    prompt = [model.decoder.dictionary.index(word) for word in PROMPT.split()]
    return folder, model, lm_hypotheses(model, prompt, 5, 1.0, 200)[0]["tokens"]


def _translation_folder(directory, arch):
    """(folder, the fairseq model, fairseq's best hypothesis of ``SOURCE``: beam 4, lenpen 0.6, the
    saved generation config's)."""
    task = TinyTask()
    model, args = model_and_args(arch, task, share_all_embeddings=True)
    end_sentences_early(model, strength=1.1, seed=3)
    folder, dictionary = directory / "hf", task.source_dictionary
    if ode_m2m100.has_rk_stack(model):
        ode_m2m100.save(model, args, dictionary, task.target_dictionary, None, str(folder))
    else:
        m2m100.save(plain_transformer(model, args), dictionary, task.target_dictionary, None, str(folder))
    src = dictionary.encode_line(SOURCE, add_if_not_exist=False)[None].long()
    sample = {"net_input": {"src_tokens": src, "src_lengths": torch.tensor([src.size(1)])}}
    generator = SequenceGenerator([model], task.target_dictionary, beam_size=4, len_penalty=0.6, max_len_b=200)
    with torch.no_grad():
        return folder, model, generator.generate([model], sample)[0][0]["tokens"]


@pytest.fixture(scope="module")
def offline(tmp_path_factory):
    """kind: (the folder, the fairseq model, fairseq's best hypothesis, what the folder gave in a
    process without ode-seq and fairseq)."""
    root = tmp_path_factory.mktemp("folders")
    built = {kind: _language_model_folder(root / kind, arch) for kind, (arch, _) in LANGUAGE_MODELS.items()}
    built.update({kind: _translation_folder(root / kind, arch) for kind, (arch, _) in TRANSLATION_MODELS.items()})
    jobs = {kind: (str(built[kind][0]), "text-generation", PROMPT) for kind in LANGUAGE_MODELS}
    jobs.update({kind: (str(built[kind][0]), "translation", SOURCE) for kind in TRANSLATION_MODELS})
    environment = {"PYTHONPATH": str(root), "HF_MODULES_CACHE": str(root / "modules")}
    out = run("python", ["-c", OFFLINE], stdin=json.dumps(jobs), cwd=str(root), env=environment)
    results = json.loads(out.stdout.splitlines()[-1])
    return {kind: (*built[kind], results[kind]) for kind in built}


@pytest.mark.parametrize("kind", [*LANGUAGE_MODELS, *TRANSLATION_MODELS])
def test_auto_tokenizer_loads_the_folder_and_encodes_and_decodes_as_its_own_class(offline, kind):
    folder, _, _, result = offline[kind]
    own = FairseqTokenizer(str(folder))
    language_model = kind in LANGUAGE_MODELS
    model_class = (LANGUAGE_MODELS if language_model else TRANSLATION_MODELS)[kind][1]
    assert result["classes"] == ["FairseqPreTrainedTokenizer", model_class]
    text = PROMPT if language_model else SOURCE
    expected = own.prompts([text]) if language_model else own([text])
    assert result["ids"] == expected["input_ids"][0].tolist()
    assert result["decoded"] == own.decode(expected["input_ids"])[0] == text


@pytest.mark.parametrize("kind", [*LANGUAGE_MODELS, *TRANSLATION_MODELS])
def test_pipeline_gives_the_text_generate_gives_fairseqs_hypothesis(offline, kind):
    """``pipeline("text-generation")`` (the prompt, then the text of the tokens after it) and
    ``pipeline("translation")`` give the text of ``generate()``'s sequence, decoded whole, and that
    sequence is fairseq's best hypothesis, ended by </s> before the length cap."""
    folder, model, hypothesis, result = offline[kind]
    dictionary = model.decoder.dictionary
    eos = dictionary.eos()
    assert hypothesis[-1] == eos and len(hypothesis) < 50, "the hypothesis hit the cap"
    assert result["generated"][1 : len(hypothesis) + 1] == hypothesis.tolist()  # after the start token
    words = " ".join(dictionary[i] for i in hypothesis[:-1])
    assert result["pipeline_text"] == result["generated_text"] == words
    assert result["pipeline_texts"] == [words, words]  # a list of inputs: one record (or list) each
