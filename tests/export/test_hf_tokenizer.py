"""The exported folder's tokenizer processes text as fairseq-interactive does: SentencePiece pieces
looked up in fairseq's dictionary (</s> appended to a source, a prompt started by </s>), and with
``--tokenizer moses`` Moses tokenisation of the source language before and detokenisation of the
target language after."""

from argparse import Namespace

import pytest
import sentencepiece
import torch
from fairseq import utils
from fairseq.data import Dictionary, encoders
from sacremoses import MosesTokenizer

from ode_seq.export.hf_folder import TOKENIZER_SETTINGS, TextProcessing, write_tokenizer
from ode_seq.export.hf_tokenizer import FairseqTokenizer

TEXT = ["the cat sat on the mat", "a dog ran in the park", "the bird sang at dawn"] * 20
SPANISH = [
    'Y dijo Dios: "Sea la luz"; y fue la luz.',
    "En el principio creó Dios los cielos y la tierra.",
    "El hombre-lobo no es de O'Brien & Cía.",
    "¿Dónde estás? (dijo él)",
]


def _folder(tmp_path, lines, vocab_size, text=None):
    """A folder as the export writes it: SentencePiece model, dictionary of its pieces, the
    tokenizer's module, settings (``text``) and config."""
    (tmp_path / "corpus.txt").write_text("\n".join(lines) + "\n")
    sentencepiece.SentencePieceTrainer.train(
        input=str(tmp_path / "corpus.txt"),
        model_prefix=str(tmp_path / "spm"),
        vocab_size=vocab_size,
        hard_vocab_limit=False,
        minloglevel=2,
    )
    spm = sentencepiece.SentencePieceProcessor(model_file=str(tmp_path / "spm.model"))
    dictionary = Dictionary()
    for line in lines:
        for piece in spm.encode(line, out_type=str):
            dictionary.add_symbol(piece)
    dictionary.finalize(padding_factor=8)
    write_tokenizer(str(tmp_path), dictionary, None, text or TextProcessing())
    if text is None:  # a folder of an earlier export, without settings
        (tmp_path / TOKENIZER_SETTINGS).unlink()
    return spm, dictionary


def test_sentencepiece_text_round_trips_through_fairseqs_dictionary_ids(tmp_path):
    spm, dictionary = _folder(tmp_path, TEXT, 24)
    tokenizer = FairseqTokenizer(str(tmp_path))
    line = "the cat ran in the park"
    expected = dictionary.encode_line(" ".join(spm.encode(line, out_type=str)), add_if_not_exist=False)
    assert tokenizer.encode(line) == expected.tolist()
    batch = tokenizer([line, "a bird"])
    assert batch["attention_mask"].sum(1).tolist() == [len(expected), len(tokenizer.encode("a bird"))]
    assert tokenizer.decode(batch["input_ids"]) == [line, "a bird"]
    prompts = tokenizer.prompts(["a bird", line])  # language-model prompts: </s> first, left-padded
    assert prompts["input_ids"][1].tolist() == [2, *expected.tolist()[:-1]]
    bird = 1 + len(tokenizer.tokens("a bird"))
    assert prompts["attention_mask"][0].tolist() == [0] * (len(expected) - bird) + [1] * bird


@pytest.fixture(params=[False, True], ids=["moses-defaults", "moses-no-dash-splits-no-escape"])
def interactive(tmp_path, request):
    """fairseq-interactive's encode_fn, decode_fn and dictionary for ``--source-lang en
    --target-lang es --tokenizer moses --bpe sentencepiece`` (and ``--moses-no-dash-splits
    --moses-no-escape``, as the language demo tokenises), and the exported tokenizer."""
    options = dict(moses_no_dash_splits=request.param, moses_no_escape=request.param)
    moses = encoders.build_tokenizer(Namespace(tokenizer="moses", source_lang="en", target_lang="es", **options))
    tokenized = [moses.encode(line) for line in SPANISH + TEXT[:3]]
    _, dictionary = _folder(tmp_path, tokenized, 120, TextProcessing("moses", "en", "es", **options))
    bpe = encoders.build_bpe(Namespace(bpe="sentencepiece", sentencepiece_model=str(tmp_path / "spm.model")))
    return (
        lambda x: bpe.encode(moses.encode(x)),
        lambda x: moses.decode(bpe.decode(x)),
        dictionary,
        FairseqTokenizer(str(tmp_path)),
    )


def test_moses_detokenises_hypotheses_as_fairseq_interactive(interactive):
    encode_fn, decode_fn, dictionary, tokenizer = interactive
    for line in SPANISH:
        hypothesis = dictionary.encode_line(encode_fn(line), add_if_not_exist=False)  # ends with </s>
        hypothesis[3] = dictionary.unk()  # as fairseq prints an unknown word
        _, text, _ = utils.post_process_prediction(
            hypothesis.int(), "", None, None, dictionary, None, extra_symbols_to_ignore={dictionary.eos()}
        )
        assert tokenizer.decode(torch.stack([hypothesis])) == [decode_fn(text)]
    whole = dictionary.encode_line(encode_fn(SPANISH[0]), add_if_not_exist=False)
    assert tokenizer.decode_one(whole.tolist()) == 'Y dijo Dios: "Sea la luz"; y fue la luz.'


def test_moses_tokenises_sources_as_fairseq_interactive(interactive):
    encode_fn, _, dictionary, tokenizer = interactive
    for line in ["In the beginning, the cat's mat-maker sat.", *TEXT[:3]]:
        assert tokenizer.encode(line) == dictionary.encode_line(encode_fn(line), add_if_not_exist=False).tolist()


def _auto_tokenizer(folder):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(folder), trust_remote_code=True)


def test_auto_tokenizer_encodes_and_decodes_as_fairseq_interactive_and_the_folders_class(interactive, tmp_path):
    """``AutoTokenizer.from_pretrained(folder, trust_remote_code=True)`` gives the sources' ids and the
    hypotheses' texts of fairseq-interactive (Moses and SentencePiece), as the folder's own class."""
    encode_fn, decode_fn, dictionary, tokenizer = interactive
    auto = _auto_tokenizer(tmp_path)
    for line in [*SPANISH, "In the beginning, the cat's mat-maker sat.", "a </s> inside"]:
        source = dictionary.encode_line(encode_fn(line), add_if_not_exist=False)
        assert auto(line)["input_ids"] == source.tolist() == tokenizer.encode(line)
        source[1] = dictionary.unk()
        _, text, _ = utils.post_process_prediction(
            source.int(), "", None, None, dictionary, None, extra_symbols_to_ignore={dictionary.eos()}
        )
        hypothesis = [dictionary.eos(), *source.tolist()]  # as generate() returns it
        assert auto.decode(hypothesis, skip_special_tokens=True) == decode_fn(text) == tokenizer.decode_one(hypothesis)
    batch, expected = auto(SPANISH, return_tensors="pt", padding=True), tokenizer(SPANISH)
    assert batch.keys() == expected.keys()
    assert all(torch.equal(batch[key], expected[key]) for key in expected)


def test_auto_tokenizer_starts_language_model_prompts_and_refuses_what_the_model_cannot_read(tmp_path):
    """A language model's prompt: the start token first, batches left-padded (the folder's
    ``prompts``); longer than the positions with its start token: refused as fairseq-interactive
    refuses it, or cut with ``truncation=True``."""
    longest = "the cat sat on the mat"
    _folder(tmp_path, TEXT, 24, TextProcessing(prompt_start=2))
    positions = len(FairseqTokenizer(str(tmp_path)).prompts([longest])["input_ids"][0])
    write_tokenizer(
        str(tmp_path),
        Dictionary.load(str(tmp_path / "dict.txt")),
        None,
        TextProcessing(prompt_start=2, max_positions=positions),
    )
    auto, tokenizer = _auto_tokenizer(tmp_path), FairseqTokenizer(str(tmp_path))
    prompts = ["a bird", longest]
    batch, expected = auto(prompts, return_tensors="pt", padding=True), tokenizer.prompts(prompts)
    assert all(torch.equal(batch[key], expected[key]) for key in ("input_ids", "attention_mask"))
    too_long = longest + " the"
    taken = 1 + len(tokenizer.tokens(too_long))
    refusal = f"takes {taken} tokens with its start token, but the model has {positions} positions"
    with pytest.raises(ValueError, match=refusal):
        auto(too_long)
    assert auto(too_long, truncation=True)["input_ids"] == expected["input_ids"][1].tolist()


@pytest.mark.parametrize("moses", [False, True])
def test_a_language_models_continuation_decodes_joined_to_its_prompt(tmp_path, moses):
    """What ``pipeline("text-generation")`` prints, the prompt then the decoded tokens after it, is
    the decoded whole: a continuation keeps the space before its first word (none inside a word, or
    before a token Moses attaches)."""
    lines = SPANISH + TEXT[:3]
    if moses:
        lines = [MosesTokenizer("en").tokenize(line, aggressive_dash_splits=True, return_str=True) for line in lines]
    _folder(tmp_path, lines, 120, TextProcessing("moses" if moses else None, prompt_start=2))
    auto = _auto_tokenizer(tmp_path)
    for line in [*SPANISH[1:], TEXT[0]]:  # not SPANISH[0]: Moses pairs quotes within what it detokenises
        ids = auto(line)["input_ids"]
        whole = auto.decode(ids, skip_special_tokens=True)
        words = line.split()
        for cut in range(1, len(words)):
            prompt = " ".join(words[:cut])
            prompt_ids = auto(prompt)["input_ids"]
            assert ids[: len(prompt_ids)] == prompt_ids
            continuation = auto.decode(ids[len(prompt_ids) :], skip_special_tokens=True)
            assert prompt + continuation == whole, (prompt, continuation)
