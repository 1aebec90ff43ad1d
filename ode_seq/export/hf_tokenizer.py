"""The tokenizer of an exported Hugging Face folder, copied into it as ``fairseq_tokenizer.py``: it
needs only the folder (``dict.txt``, ``fairseq_tokenizer.json``, and ``spm.model`` when the corpus
was SentencePiece-encoded), torch, sentencepiece, and sacremoses when the settings say ``moses``;
never fairseq or ode-seq.

Text is processed as ``fairseq-interactive`` does with the same ``--tokenizer`` and ``--bpe
sentencepiece``. Encoding: Moses tokenisation of the source language (aggressive dash splits, XML
escapes: fairseq's defaults) if set, then SentencePiece pieces (or the whitespace tokens), each
looked up in fairseq's dictionary (<s> 0, <pad> 1, </s> 2, <unk> 3, then dict.txt in order). A
translation source gets </s> appended, batches right-padded with an attention mask; a language
model prompt starts with the settings' ``prompt_start`` token (fairseq's LMs: </s>), batches
left-padded. An input longer than the settings' ``max_positions`` (with its </s> or start token)
is refused, as fairseq-interactive refuses it. Decoding: the symbols but <s>, <pad>, </s>, joined
by spaces; SentencePiece's "▁" made the spaces; Moses detokenisation of the target language if set.

With the folder on the module path (``PYTHONPATH=FOLDER python …``):

    from fairseq_tokenizer import FairseqTokenizer
    tokenizer = FairseqTokenizer(folder)
    model = M2M100ForConditionalGeneration.from_pretrained(folder)
    print(tokenizer.decode(model.generate(**tokenizer(["a sentence"]))))
    lm = AutoModelForCausalLM.from_pretrained(folder, trust_remote_code=True)
    print(tokenizer.decode(lm.generate(**tokenizer.prompts(["In the beginning"]))))
"""

from __future__ import annotations

import json
import os
from typing import Dict, List, Sequence

import torch

SPECIALS = ("<s>", "<pad>", "</s>", "<unk>")
SPM_SPACE = "\u2581"


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
        settings_path = os.path.join(folder, "fairseq_tokenizer.json")
        settings = {}
        if os.path.exists(settings_path):
            with open(settings_path, encoding="utf-8") as f:
                settings = json.load(f)
        self.prompt_start = settings.get("prompt_start", self.eos)
        self.max_positions = settings.get("max_positions")
        self.moses = None
        if settings.get("tokenizer") == "moses":
            from sacremoses import MosesDetokenizer, MosesTokenizer

            self.moses = (MosesTokenizer(settings["source_lang"]), MosesDetokenizer(settings["target_lang"]))
        spm_path = os.path.join(folder, "spm.model")
        self.spm = None
        if os.path.exists(spm_path):
            import sentencepiece

            self.spm = sentencepiece.SentencePieceProcessor(model_file=spm_path)

    def tokens(self, text: str) -> List[int]:
        """The dictionary ids of ``text``'s tokens (Moses, then SentencePiece, as set)."""
        if self.moses is not None:
            text = self.moses[0].tokenize(text, aggressive_dash_splits=True, return_str=True, escape=True)
        pieces = self.spm.encode(text, out_type=str) if self.spm is not None else text.split()
        return [self.index.get(p, self.unk) for p in pieces]

    def fitting(self, ids: List[int], text: str, special: str) -> List[int]:
        """``ids`` of ``text`` (with the ``special`` token); ValueError when the model cannot read
        that many tokens."""
        if self.max_positions is not None and len(ids) > self.max_positions:
            shown = f"{text[:40]!r}{'...' if len(text) > 40 else ''}"
            raise ValueError(
                f"{shown} takes {len(ids)} tokens with its {special}, but the model has {self.max_positions} "
                f"positions (fairseq-interactive refuses it too): shorten it to at most "
                f"{self.max_positions - 1} tokens"
            )
        return ids

    def encode(self, text: str) -> List[int]:
        """A translation source: its tokens and </s>."""
        return self.fitting(self.tokens(text) + [self.eos], text, "</s>")

    def batch(self, encoded: Sequence[List[int]], left: bool = False) -> Dict[str, torch.Tensor]:
        """``input_ids`` and ``attention_mask`` of id lists, padded on the right (or the left)."""
        longest = max(len(ids) for ids in encoded)
        input_ids = torch.full((len(encoded), longest), self.pad, dtype=torch.long)
        attention_mask = torch.zeros((len(encoded), longest), dtype=torch.long)
        for row, ids in enumerate(encoded):
            span = slice(longest - len(ids), longest) if left else slice(0, len(ids))
            input_ids[row, span] = torch.tensor(ids, dtype=torch.long)
            attention_mask[row, span] = 1
        return {"input_ids": input_ids, "attention_mask": attention_mask}

    def __call__(self, texts: Sequence[str]) -> Dict[str, torch.Tensor]:
        """A batch of translation sources, right-padded."""
        return self.batch([self.encode(t) for t in texts])

    def prompts(self, texts: Sequence[str]) -> Dict[str, torch.Tensor]:
        """A batch of language-model prompts (the start token, then the prompt's tokens), left-padded."""
        start = [self.prompt_start]
        return self.batch([self.fitting(start + self.tokens(t), t, "start token") for t in texts], left=True)

    def decode_one(self, ids: Sequence[int]) -> str:
        text = " ".join(self.symbols[i] for i in ids if i not in (self.bos, self.pad, self.eos))
        if self.spm is not None:
            text = text.replace(" ", "").replace(SPM_SPACE, " ").strip()
        if self.moses is not None:
            text = self.moses[1].detokenize(text.split())
        return text

    def decode(self, batch: torch.Tensor) -> List[str]:
        """The texts of a batch of generated ids (a tensor of rows)."""
        return [self.decode_one(row.tolist()) for row in batch]
