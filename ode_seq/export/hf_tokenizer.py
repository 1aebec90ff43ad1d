"""The tokenizer of an exported Hugging Face folder, copied into it as ``fairseq_tokenizer.py``:
``AutoTokenizer.from_pretrained(folder, trust_remote_code=True)`` gives
:class:`FairseqPreTrainedTokenizer` (the folder's ``tokenizer_config.json`` maps ``AutoTokenizer``
to it). It needs only the folder (``dict.txt``, ``fairseq_tokenizer.json``, and ``spm.model`` when
the corpus was SentencePiece-encoded), transformers, sentencepiece, and sacremoses when the
settings say ``moses``; never fairseq or ode-seq.

Text is processed as ``fairseq-interactive`` does with the same ``--tokenizer`` and ``--bpe
sentencepiece`` (:class:`FairseqText`). Encoding: Moses tokenisation of the source language
(aggressive dash splits and XML escapes, fairseq's defaults, unless the settings say
``moses_no_dash_splits``, ``moses_no_escape``) if set, then SentencePiece pieces (or the
whitespace tokens), each looked up in fairseq's dictionary (<s> 0, <pad> 1, </s> 2, <unk> 3, then
dict.txt in order). A translation source gets </s> appended, batches right-padded; a language
model prompt (the settings name its ``prompt_start`` token, fairseq's LMs: </s>) starts with that
token, batches left-padded. An input longer than the settings' ``max_positions`` (with its </s> or
start token) is refused, as fairseq-interactive refuses it (``truncation=True`` cuts it instead).
Decoding: the symbols (with ``skip_special_tokens=True`` all but <s>, <pad>, </s>: fairseq prints
<unk>) joined by spaces; SentencePiece's "▁" made the spaces; Moses detokenisation of the target
language if set; a language model's tokens without its start token (what
``pipeline("text-generation")`` decodes after the prompt) keep the space before their first word.

    tokenizer = AutoTokenizer.from_pretrained(folder, trust_remote_code=True)
    model = AutoModelForSeq2SeqLM.from_pretrained(folder, trust_remote_code=True)
    ids = model.generate(**tokenizer(["a sentence"], return_tensors="pt"))
    print(tokenizer.decode(ids, skip_special_tokens=True))

:class:`FairseqTokenizer` keeps the interface of earlier folders (``FairseqTokenizer(folder)``, the
folder on ``PYTHONPATH``): ``tokenizer(texts)`` and ``tokenizer.prompts(texts)`` give padded
tensors, ``tokenizer.decode(batch)`` the texts.
"""

from __future__ import annotations

import json
import os
import shutil
from typing import Dict, List, Optional, Sequence, Tuple

import torch
from transformers import PreTrainedTokenizer
from transformers.utils.import_utils import is_sacremoses_available, is_sentencepiece_available

SPECIALS = ("<s>", "<pad>", "</s>", "<unk>")
BOS, PAD, EOS, UNK = range(4)
SPM_SPACE = "\u2581"
DICTIONARY, SETTINGS, SENTENCEPIECE = "dict.txt", "fairseq_tokenizer.json", "spm.model"
AFTER = "word"  # the earlier text Moses detokenises a continuation after


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


def moses(source_lang: str, target_lang: str):
    """sacremoses' (tokenizer of the source language, detokenizer of the target language)."""
    if is_sacremoses_available():  # transformers' import check skips this block
        from sacremoses import MosesDetokenizer, MosesTokenizer

        return MosesTokenizer(source_lang), MosesDetokenizer(target_lang)
    raise ImportError(f'{SETTINGS} says "tokenizer": "moses": install sacremoses (pip install sacremoses)')


def sentencepiece_model(path: str):
    if is_sentencepiece_available():  # transformers' import check skips this block
        import sentencepiece

        return sentencepiece.SentencePieceProcessor(model_file=path)
    raise ImportError(f"the folder holds {SENTENCEPIECE}: install sentencepiece (pip install sentencepiece)")


class FairseqText:
    """fairseq-interactive's text processing: text ↔ dictionary symbols and ids. ``settings``:
    ``fairseq_tokenizer.json``'s path (``tokenizer``, ``source_lang``, ``target_lang``,
    ``moses_no_dash_splits``, ``moses_no_escape``;
    ``prompt_start``, None for a translation model; ``max_positions``, None for no limit)."""

    def __init__(self, dictionary: str, settings: Optional[str] = None, spm: Optional[str] = None) -> None:
        self.symbols = read_dictionary(dictionary)
        self.index: Dict[str, int] = {}
        for i, symbol in enumerate(self.symbols):
            self.index.setdefault(symbol, i)
        options = {}
        if settings is not None and os.path.exists(settings):
            with open(settings, encoding="utf-8") as f:
                options = json.load(f)
        self.prompt_start: Optional[int] = options.get("prompt_start")
        self.max_positions: Optional[int] = options.get("max_positions")
        self.moses = (
            moses(options["source_lang"], options["target_lang"]) if options.get("tokenizer") == "moses" else None
        )
        self.moses_options = {
            "aggressive_dash_splits": not options.get("moses_no_dash_splits", False),
            "escape": not options.get("moses_no_escape", False),
        }
        self.spm = sentencepiece_model(spm) if spm is not None and os.path.exists(spm) else None

    def pieces(self, text: str) -> List[str]:
        """The symbols of ``text`` (Moses, then SentencePiece, as set), unknown ones included."""
        if self.moses is not None:
            text = self.moses[0].tokenize(text, return_str=True, **self.moses_options)
        return self.spm.encode(text, out_type=str) if self.spm is not None else text.split()

    def ids(self, text: str) -> List[int]:
        """The dictionary ids of ``text``'s tokens."""
        return [self.index.get(p, UNK) for p in self.pieces(text)]

    def text(self, symbols: Sequence[str], continuation: bool = False) -> str:
        """The text of ``symbols``: joined by spaces, SentencePiece's "▁" made the spaces, Moses
        detokenisation as set. ``continuation``: the symbols follow earlier text (a language
        model's tokens after its prompt), and their text starts with the space that joins it to that
        text: a word's (every symbol of a word-level dictionary, a piece with "▁"), none where Moses
        attaches the first token to the word before it (as ",")."""
        text = " ".join(symbols)
        if self.spm is not None:
            text = text.replace(" ", "").replace(SPM_SPACE, " ")
            text = text.rstrip() if continuation else text.strip()
        elif continuation and text:
            text = " " + text
        if self.moses is None:
            return text
        if continuation and text.startswith(" "):
            return self.moses[1].detokenize([AFTER, *text.split()])[len(AFTER) :]
        return self.moses[1].detokenize(text.split())

    def check_length(self, length: int, special: str, shown: str = "the input") -> None:
        """ValueError when the model cannot read ``length`` tokens (with the ``special`` token)."""
        if self.max_positions is not None and length > self.max_positions:
            raise ValueError(
                f"{shown} takes {length} tokens with its {special}, but the model has {self.max_positions} "
                f"positions (fairseq-interactive refuses it too): shorten it to at most "
                f"{self.max_positions - 1} tokens"
            )


class FairseqPreTrainedTokenizer(PreTrainedTokenizer):
    """``AutoTokenizer``'s class of the folder: the dictionary ids of :class:`FairseqText`'s symbols,
    a translation source ended by </s> and right-padded, a language-model prompt started by the
    settings' ``prompt_start`` token and left-padded."""

    vocab_files_names = {"dictionary_file": DICTIONARY, "settings_file": SETTINGS, "sentencepiece_file": SENTENCEPIECE}
    model_input_names = ["input_ids", "attention_mask"]

    def __init__(
        self,
        dictionary_file: str,
        settings_file: Optional[str] = None,
        sentencepiece_file: Optional[str] = None,
        **kwargs,
    ) -> None:
        self.fairseq = FairseqText(dictionary_file, settings_file, sentencepiece_file)
        self.files = {DICTIONARY: dictionary_file, SETTINGS: settings_file, SENTENCEPIECE: sentencepiece_file}
        language_model = self.fairseq.prompt_start is not None
        self.prefix_tokens = [self.fairseq.prompt_start] if language_model else []
        self.suffix_tokens = [] if language_model else [EOS]
        self.special = "start token" if language_model else "</s>"
        defaults = dict(zip(("bos_token", "pad_token", "eos_token", "unk_token"), SPECIALS))
        defaults.update(padding_side="left" if language_model else "right", split_special_tokens=True)
        if self.fairseq.max_positions is not None:
            defaults["model_max_length"] = self.fairseq.max_positions
        super().__init__(**{**defaults, **kwargs, "special_tokens_pattern": "prefix_suffix"})

    @property
    def vocab_size(self) -> int:
        return len(self.fairseq.symbols)

    def get_vocab(self) -> Dict[str, int]:
        return {**self.fairseq.index, **self.added_tokens_encoder}

    def _tokenize(self, text: str, **kwargs) -> List[str]:
        return self.fairseq.pieces(text)

    def _convert_token_to_id(self, token: str) -> int:
        return self.fairseq.index.get(token, UNK)

    def _convert_id_to_token(self, index: int) -> str:
        return self.fairseq.symbols[index]

    def convert_tokens_to_string(self, tokens: List[str]) -> str:
        return self.fairseq.text(tokens)

    def _decode(self, token_ids, skip_special_tokens: bool = False, clean_up_tokenization_spaces=None, **kwargs) -> str:
        """fairseq's text of ``token_ids``: ``skip_special_tokens`` drops <s>, <pad> and </s>, not
        <unk> (fairseq prints it). A language model's ids that do not start (after padding) with its
        start token continue a text, as the tokens ``pipeline("text-generation")`` decodes after
        the prompt (:meth:`FairseqText.text`)."""
        ids = [token_ids] if isinstance(token_ids, int) else list(token_ids)
        first = next((i for i in ids if i != PAD), None)
        continuation = bool(self.prefix_tokens) and first is not None and first != self.prefix_tokens[0]
        if skip_special_tokens:
            ids = [i for i in ids if i not in (BOS, PAD, EOS)]
        text = self.fairseq.text(self.convert_ids_to_tokens(ids), continuation)
        return self.clean_up_tokenization(text) if clean_up_tokenization_spaces else text

    def _eventual_warn_about_too_long_sequence(self, ids: List[int], max_length: Optional[int], verbose: bool):
        """Refuse an input longer than the model's positions, as fairseq-interactive does (transformers
        warns), unless a ``max_length`` (``truncation=True``) was asked for."""
        if max_length is None:
            self.fairseq.check_length(len(ids), self.special)

    def save_vocabulary(self, save_directory: str, filename_prefix: Optional[str] = None) -> Tuple[str, ...]:
        """The folder's dictionary, settings and SentencePiece model, copied into ``save_directory``."""
        saved = []
        for name, source in self.files.items():
            if source is None or not os.path.exists(source):
                continue
            target = os.path.join(save_directory, f"{filename_prefix}-{name}" if filename_prefix else name)
            if os.path.abspath(source) != os.path.abspath(target):
                shutil.copyfile(source, target)
            saved.append(target)
        return tuple(saved)


class FairseqTokenizer(FairseqText):
    """Text ↔ token ids as tensors, the interface of earlier folders: ``FairseqTokenizer(folder)``."""

    def __init__(self, folder: str) -> None:
        paths = (os.path.join(folder, name) for name in (DICTIONARY, SETTINGS, SENTENCEPIECE))
        super().__init__(*paths)
        self.bos, self.pad, self.eos, self.unk = BOS, PAD, EOS, UNK

    def tokens(self, text: str) -> List[int]:
        return self.ids(text)

    def fitting(self, ids: List[int], text: str, special: str) -> List[int]:
        """``ids`` of ``text`` (with the ``special`` token); ValueError when the model cannot read
        that many tokens."""
        self.check_length(len(ids), special, f"{text[:40]!r}{'...' if len(text) > 40 else ''}")
        return ids

    def encode(self, text: str) -> List[int]:
        """A translation source: its tokens and </s>."""
        return self.fitting(self.ids(text) + [EOS], text, "</s>")

    def batch(self, encoded: Sequence[List[int]], left: bool = False) -> Dict[str, torch.Tensor]:
        """``input_ids`` and ``attention_mask`` of id lists, padded on the right (or the left)."""
        longest = max(len(ids) for ids in encoded)
        input_ids = torch.full((len(encoded), longest), PAD, dtype=torch.long)
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
        start = [EOS if self.prompt_start is None else self.prompt_start]
        return self.batch([self.fitting(start + self.ids(t), t, "start token") for t in texts], left=True)

    def decode_one(self, ids: Sequence[int]) -> str:
        return self.text([self.symbols[i] for i in ids if i not in (BOS, PAD, EOS)])

    def decode(self, batch: torch.Tensor) -> List[str]:
        """The texts of a batch of generated ids (a tensor of rows)."""
        return [self.decode_one(row.tolist()) for row in batch]
