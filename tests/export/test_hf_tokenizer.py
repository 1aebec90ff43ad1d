"""The exported folder's tokenizer encodes as fairseq does (SentencePiece pieces looked up in the
dictionary, </s> appended) and decodes back to the text."""

import sentencepiece
from fairseq.data import Dictionary

from ode_seq.export.hf_tokenizer import FairseqTokenizer

TEXT = ["the cat sat on the mat", "a dog ran in the park", "the bird sang at dawn"] * 20


def test_sentencepiece_text_round_trips_through_fairseqs_dictionary_ids(tmp_path):
    (tmp_path / "corpus.txt").write_text("\n".join(TEXT) + "\n")
    sentencepiece.SentencePieceTrainer.train(
        input=str(tmp_path / "corpus.txt"),
        model_prefix=str(tmp_path / "spm"),
        vocab_size=24,
        minloglevel=2,
    )
    spm = sentencepiece.SentencePieceProcessor(model_file=str(tmp_path / "spm.model"))
    dictionary = Dictionary()
    for line in TEXT:
        for piece in spm.encode(line, out_type=str):
            dictionary.add_symbol(piece)
    dictionary.finalize(padding_factor=8)
    dictionary.save(str(tmp_path / "dict.txt"))
    tokenizer = FairseqTokenizer(str(tmp_path))
    line = "the cat ran in the park"
    expected = dictionary.encode_line(" ".join(spm.encode(line, out_type=str)), add_if_not_exist=False)
    assert tokenizer.encode(line) == expected.tolist()
    batch = tokenizer([line, "a bird"])
    assert batch["attention_mask"].sum(1).tolist() == [len(expected), len(tokenizer.encode("a bird"))]
    assert tokenizer.decode(batch["input_ids"]) == [line, "a bird"]
