"""What an exported Hugging Face folder holds besides the model: the generation config, fairseq's
dictionary, the SentencePiece model, and the tokenizer module (:mod:`.hf_tokenizer`, copied as
``fairseq_tokenizer.py``) with its settings (``fairseq_tokenizer.json``: what
``fairseq-interactive`` was told with ``--tokenizer``, and the token language-model prompts start
from)."""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import asdict, dataclass
from typing import Any, Optional

BOS, PAD, EOS = 0, 1, 2  # fairseq's dictionaries: <s>, <pad>, </s>
TOKENIZER_MODULE = "fairseq_tokenizer.py"
TOKENIZER_SETTINGS = "fairseq_tokenizer.json"
TOKENIZERS = ("moses",)


@dataclass(frozen=True)
class TextProcessing:
    """fairseq-interactive's ``--tokenizer`` (None or ``moses``, with its ``--source-lang`` and
    ``--target-lang``: fairseq's defaults are en); for a language model, the token its prompts
    start from (</s> = 2, or <s> = 0 with ``--add-bos-token``); ``max_positions``: the most tokens
    fairseq-interactive accepts in one input (a source with its </s>: the model's source positions;
    a prompt with its start token: a language model's positions), None for no limit."""

    tokenizer: Optional[str] = None
    source_lang: str = "en"
    target_lang: str = "en"
    prompt_start: int = 2
    max_positions: Optional[int] = None


def fairseq_search(beam: int, lenpen: float, **limits: Any):
    """transformers' ``GenerationConfig`` of fairseq's beam search: ``beam`` hypotheses, length
    penalty ``lenpen``, done when ``beam`` hypotheses have ended in </s>, <pad> never generated;
    ``limits``: the model's length limits and start tokens."""
    from transformers import GenerationConfig

    return GenerationConfig(
        num_beams=beam,
        length_penalty=lenpen,
        early_stopping=True,
        suppress_tokens=[PAD],
        pad_token_id=PAD,
        eos_token_id=EOS,
        **limits,
    )


def save_folder(model, generation_config, dictionary, spm: Optional[str], text: TextProcessing, output: str) -> None:
    """``save_pretrained`` (safetensors) of ``model`` with ``generation_config``, the dictionary, the
    SentencePiece model if given, the tokenizer module and its settings."""
    model.generation_config = generation_config
    model.save_pretrained(output, safe_serialization=True)
    dictionary.save(os.path.join(output, "dict.txt"))
    if spm is not None:
        shutil.copyfile(spm, os.path.join(output, "spm.model"))
    shutil.copyfile(os.path.join(os.path.dirname(__file__), "hf_tokenizer.py"), os.path.join(output, TOKENIZER_MODULE))
    with open(os.path.join(output, TOKENIZER_SETTINGS), "w", encoding="utf-8") as f:
        json.dump(asdict(text), f, indent=2)
