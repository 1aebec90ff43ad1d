"""The exported folder's tokenizer processes text as fairseq-interactive does: SentencePiece pieces
looked up in fairseq's dictionary (</s> appended to a source, a prompt started by </s>), and with
``--tokenizer moses`` Moses tokenisation of the source language before and detokenisation of the
target language after."""

import json
from argparse import Namespace

import pytest
import sentencepiece
import torch
from fairseq import utils
from fairseq.data import Dictionary, encoders

from ode_seq.export.hf_folder import TOKENIZER_SETTINGS, TextProcessing
from ode_seq.export.hf_tokenizer import FairseqTokenizer

TEXT = ["the cat sat on the mat", "a dog ran in the park", "the bird sang at dawn"] * 20
SPANISH = [
    'Y dijo Dios: "Sea la luz"; y fue la luz.',
    "En el principio creó Dios los cielos y la tierra.",
    "El hombre-lobo no es de O'Brien & Cía.",
    "¿Dónde estás? (dijo él)",
]


def _folder(tmp_path, lines, vocab_size, text=None):
    """A folder as the export writes it: SentencePiece model, dictionary of its pieces, settings."""
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
    dictionary.save(str(tmp_path / "dict.txt"))
    if text is not None:
        (tmp_path / TOKENIZER_SETTINGS).write_text(json.dumps(text.__dict__))
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


@pytest.fixture
def interactive(tmp_path):
    """fairseq-interactive's encode_fn, decode_fn and dictionary for ``--source-lang en
    --target-lang es --tokenizer moses --bpe sentencepiece``, and the exported tokenizer."""
    moses = encoders.build_tokenizer(
        Namespace(
            tokenizer="moses", source_lang="en", target_lang="es", moses_no_dash_splits=False, moses_no_escape=False
        )
    )
    tokenized = [moses.encode(line) for line in SPANISH + TEXT[:3]]
    _, dictionary = _folder(tmp_path, tokenized, 120, TextProcessing("moses", "en", "es"))
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
