"""What an exported Hugging Face folder holds besides the model: the generation config, fairseq's
dictionary, the SentencePiece model, and the tokenizer module (:mod:`.hf_tokenizer`, copied as
``fairseq_tokenizer.py``) with its settings (``fairseq_tokenizer.json``: what
``fairseq-interactive`` was told with ``--tokenizer``, and the token language-model prompts start
from) and ``tokenizer_config.json``, which maps ``AutoTokenizer`` to it; a translation folder
also the translation pipeline (:mod:`.hf_pipeline`, copied as ``translation_pipeline.py``), which
``config.json``'s ``custom_pipelines`` names for ``pipeline("translation")``."""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import asdict, dataclass
from typing import Any, Optional

BOS, PAD, EOS = 0, 1, 2  # fairseq's dictionaries: <s>, <pad>, </s>
TOKENIZER_MODULE = "fairseq_tokenizer.py"
TOKENIZER_SETTINGS = "fairseq_tokenizer.json"
TOKENIZER_CONFIG = {
    "tokenizer_class": "FairseqPreTrainedTokenizer",
    "auto_map": {"AutoTokenizer": ["fairseq_tokenizer.FairseqPreTrainedTokenizer", None]},
}
PIPELINE_MODULE = "translation_pipeline.py"
TRANSLATION_PIPELINE = {
    "translation": {"impl": "translation_pipeline.TranslationPipeline", "pt": ["AutoModelForSeq2SeqLM"], "type": "text"}
}
TOKENIZERS = ("moses",)


@dataclass(frozen=True)
class TextProcessing:
    """fairseq-interactive's ``--tokenizer`` (None or ``moses``, with its ``--source-lang`` and
    ``--target-lang``: fairseq's defaults are en, and ``--moses-no-dash-splits``,
    ``--moses-no-escape``); for a language model, the token its prompts start from (</s> = 2, or
    <s> = 0 with ``--add-bos-token``; None for a translation model, whose sources end with </s>);
    ``max_positions``: the most tokens fairseq-interactive accepts in one input (a source with its
    </s>: the model's source positions; a prompt with its start token: a language model's
    positions), None for no limit."""

    tokenizer: Optional[str] = None
    source_lang: str = "en"
    target_lang: str = "en"
    prompt_start: Optional[int] = None
    max_positions: Optional[int] = None
    moses_no_dash_splits: bool = False
    moses_no_escape: bool = False


def fairseq_search(beam: int, lenpen: float, **limits: Any):
    """transformers' ``GenerationConfig`` of fairseq's beam search: ``beam`` hypotheses, length
    penalty ``lenpen``, done when ``beam`` hypotheses have ended in </s>, <pad> never generated;
    ``limits``: the model's length limits and start tokens. ``do_sample`` is said (False): a
    pipeline samples where the config is silent."""
    from transformers import GenerationConfig

    return GenerationConfig(
        num_beams=beam,
        do_sample=False,
        length_penalty=lenpen,
        early_stopping=True,
        suppress_tokens=[PAD],
        pad_token_id=PAD,
        eos_token_id=EOS,
        **limits,
    )


def save_folder(model, generation_config, dictionary, spm: Optional[str], text: TextProcessing, output: str) -> None:
    """``save_pretrained`` (safetensors) of ``model`` with ``generation_config``, and
    :func:`write_tokenizer`; a translation model (``text.prompt_start`` None) gets the translation
    pipeline (``config.json``'s ``custom_pipelines`` and its module)."""
    translation = text.prompt_start is None
    if translation:
        model.config.custom_pipelines = TRANSLATION_PIPELINE
    model.generation_config = generation_config
    model.save_pretrained(output, safe_serialization=True)
    write_tokenizer(output, dictionary, spm, text)
    if translation:
        shutil.copyfile(
            os.path.join(os.path.dirname(__file__), "hf_pipeline.py"), os.path.join(output, PIPELINE_MODULE)
        )


def write_tokenizer(output: str, dictionary, spm: Optional[str], text: TextProcessing) -> None:
    """The tokenizer's files in the folder ``output``: fairseq's dictionary, the SentencePiece model
    if given, the tokenizer module, its settings and ``tokenizer_config.json``."""
    dictionary.save(os.path.join(output, "dict.txt"))
    if spm is not None:
        shutil.copyfile(spm, os.path.join(output, "spm.model"))
    shutil.copyfile(os.path.join(os.path.dirname(__file__), "hf_tokenizer.py"), os.path.join(output, TOKENIZER_MODULE))
    for name, content in ((TOKENIZER_SETTINGS, asdict(text)), ("tokenizer_config.json", TOKENIZER_CONFIG)):
        with open(os.path.join(output, name), "w", encoding="utf-8") as f:
            json.dump(content, f, indent=2)
