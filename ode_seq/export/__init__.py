"""Export trained models outside ode-seq: a plain fairseq ``transformer`` checkpoint
(:mod:`.plain`), a CTranslate2 model (:mod:`.ctranslate2`) and a Hugging Face M2M100 folder
(:mod:`.m2m100`)."""

from .plain import NotRepresentable, PlainTransformer, plain_transformer

__all__ = ["NotRepresentable", "PlainTransformer", "plain_transformer"]
