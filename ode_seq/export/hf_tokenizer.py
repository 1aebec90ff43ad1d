"""The tokenizer of an exported M2M100 folder, copied into it as ``fairseq_tokenizer.py``: it needs
only the folder (``dict.txt``, and ``spm.model`` when the corpus was SentencePiece-encoded),
sentencepiece and torch, never fairseq or ode-seq.

Encoding is fairseq's: SentencePiece pieces (or the whitespace tokens of an already tokenized
text), each looked up in fairseq's dictionary (<s> 0, <pad> 1, </s> 2, <unk> 3, then dict.txt in
order), with </s> appended to the source. Batches are right-padded with an attention mask.
With the folder on the module path (``PYTHONPATH=FOLDER python …``):

    from fairseq_tokenizer import FairseqTokenizer
    tokenizer = FairseqTokenizer(folder)
    model = M2M100ForConditionalGeneration.from_pretrained(folder)
    print(tokenizer.decode(model.generate(**tokenizer(["a sentence"]))))
"""

from __future__ import annotations

import os
from typing import Dict, List, Sequence

import torch

SPECIALS = ("<s>", "<pad>", "</s>", "<unk>")


def read_dictionary(path: str) -> List[str]:
    """The symbols of a fairseq dictionary file (``symbol count [#fairseq:overwrite]`` lines)."""
    symbols = list(SPECIALS)
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if line.endswith(" #fairseq:overwrite"):
                line = line[: -len(" #fairseq:overwrite")]
            symbols.append(line.rsplit(" ", 1)[0])
    return symbols


class FairseqTokenizer:
    """Text ↔ token ids of the exported model."""

    def __init__(self, folder: str) -> None:
        self.symbols = read_dictionary(os.path.join(folder, "dict.txt"))
        self.index: Dict[str, int] = {}
        for i, symbol in enumerate(self.symbols):
            self.index.setdefault(symbol, i)
        self.bos, self.pad, self.eos, self.unk = range(4)
        spm_path = os.path.join(folder, "spm.model")
        self.spm = None
        if os.path.exists(spm_path):
            import sentencepiece

            self.spm = sentencepiece.SentencePieceProcessor(model_file=spm_path)

    def encode(self, text: str) -> List[int]:
        pieces = self.spm.encode(text, out_type=str) if self.spm is not None else text.split()
        return [self.index.get(p, self.unk) for p in pieces] + [self.eos]

    def __call__(self, texts: Sequence[str]) -> Dict[str, torch.Tensor]:
        """``input_ids`` and ``attention_mask`` of a batch, right-padded."""
        encoded = [self.encode(t) for t in texts]
        longest = max(len(ids) for ids in encoded)
        input_ids = torch.full((len(encoded), longest), self.pad, dtype=torch.long)
        attention_mask = torch.zeros((len(encoded), longest), dtype=torch.long)
        for row, ids in enumerate(encoded):
            input_ids[row, : len(ids)] = torch.tensor(ids)
            attention_mask[row, : len(ids)] = 1
        return {"input_ids": input_ids, "attention_mask": attention_mask}

    def decode_one(self, ids: Sequence[int]) -> str:
        pieces = [self.symbols[i] for i in ids if i not in (self.bos, self.pad, self.eos)]
        return self.spm.decode(pieces) if self.spm is not None else " ".join(pieces)

    def decode(self, batch: torch.Tensor) -> List[str]:
        """The texts of a batch of generated ids (a tensor of rows)."""
        return [self.decode_one(row.tolist()) for row in batch]
