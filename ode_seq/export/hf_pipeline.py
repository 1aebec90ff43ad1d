"""The translation pipeline of an exported translation folder, copied into it as
``translation_pipeline.py`` and named in ``config.json``'s ``custom_pipelines``, so that
``pipeline("translation", model=folder, trust_remote_code=True)`` translates (transformers 5 removed
its own translation pipeline): each text is the folder tokenizer's source, ``generate()`` runs with
the folder's generation config (fairseq-generate's beam search) and any generation options given,
and the output is ``[{"translation_text": text}]`` per input, the text decoded without <s>, <pad>
and </s>, as transformers 4's pipeline gave it. Needs transformers and torch only."""

from __future__ import annotations

from typing import Any, Dict, List

from transformers import Pipeline


class TranslationPipeline(Pipeline):
    """Sources → ``generate()`` → ``{"translation_text": ...}`` per returned sequence."""

    _pipeline_calls_generate = True
    _load_processor = False
    _load_image_processor = False
    _load_feature_extractor = False
    _load_tokenizer = True

    def __call__(self, texts, **kwargs):
        """A list of ``{"translation_text": ...}`` for a text, or for each of a list of texts (one per
        text when each gets one sequence, as transformers 4's translation pipeline)."""
        result = super().__call__(texts, **kwargs)
        if isinstance(texts, list) and all(len(records) == 1 for records in result):
            return [records[0] for records in result]
        return result

    def _sanitize_parameters(self, **generate_kwargs):
        return {}, generate_kwargs, {}

    def preprocess(self, text: str) -> Dict[str, Any]:
        return self.tokenizer(text, return_tensors="pt")

    def _forward(self, model_inputs: Dict[str, Any], **generate_kwargs) -> Dict[str, Any]:
        return {"output_ids": self.model.generate(**model_inputs, **self._prepare_generate_kwargs(generate_kwargs))}

    def postprocess(self, model_outputs: Dict[str, Any]) -> List[Dict[str, str]]:
        texts = self.tokenizer.decode(model_outputs["output_ids"].tolist(), skip_special_tokens=True)
        return [{"translation_text": text} for text in texts]
