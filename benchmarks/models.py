"""The compared models: fairseq's ``transformer`` (pre-norm) and ``ode_transformer``, and the
language models fairseq's ``transformer_lm`` (pre-norm) and ``ode_transformer_lm``, built the way
fairseq-train builds them, at one width and with the same dropout everywhere."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict

import torch
from fairseq.data import Dictionary
from fairseq.models import ARCH_MODEL_REGISTRY, FairseqLanguageModel
from torch import nn

import user_dir  # noqa: F401  (registers ode_transformer, applies the fairseq fixes)
from benchmarks.settings import Settings
from testkit.by_name import DictionaryTask, build_model


@dataclass(frozen=True)
class ModelSpec:
    """A fairseq architecture and the command-line option values that differ from the base."""

    label: str
    arch: str
    options: Dict[str, Any] = field(default_factory=dict)


def transformer(label: str, encoder_layers: int, decoder_layers: int) -> ModelSpec:
    """fairseq's transformer with --encoder-normalize-before --decoder-normalize-before."""
    return ModelSpec(label, "transformer", dict(encoder_layers=encoder_layers, decoder_layers=decoder_layers))


def ode(
    label: str,
    encoder_layers: int,
    decoder_layers: int,
    encoder_method: str = "euler",
    decoder_method: str = "euler",
    **options: Any,
) -> ModelSpec:
    """``ode_transformer`` with Runge–Kutta blocks of the given methods."""
    return ModelSpec(
        label,
        "ode_transformer",
        dict(
            encoder_layers=encoder_layers,
            decoder_layers=decoder_layers,
            encoder_ode_method=encoder_method,
            decoder_ode_method=decoder_method,
            **options,
        ),
    )


def transformer_lm(label: str, layers: int) -> ModelSpec:
    """fairseq's transformer_lm with --decoder-normalize-before."""
    return ModelSpec(label, "transformer_lm", dict(decoder_layers=layers))


def ode_lm(label: str, layers: int, method: str = "euler", **options: Any) -> ModelSpec:
    """``ode_transformer_lm`` with Runge–Kutta blocks of ``method``."""
    return ModelSpec(label, "ode_transformer_lm", dict(decoder_layers=layers, decoder_ode_method=method, **options))


def width_options(spec: ModelSpec, settings: Settings) -> Dict[str, Any]:
    """Width, pre-norm and dropout of every model; a language model's input and output
    dimensions are its width (transformer_lm's default is 512 whatever the width) and it ties
    its input and output embeddings."""
    d = settings.embed_dim
    decoder = dict(
        decoder_embed_dim=d,
        decoder_ffn_embed_dim=settings.ffn_dim,
        decoder_attention_heads=settings.heads,
        decoder_normalize_before=True,
    )
    if issubclass(ARCH_MODEL_REGISTRY[spec.arch], FairseqLanguageModel):
        sides = dict(decoder_input_dim=d, decoder_output_dim=d, share_decoder_input_output_embed=True)
    else:
        sides = dict(
            encoder_embed_dim=d,
            encoder_ffn_embed_dim=settings.ffn_dim,
            encoder_attention_heads=settings.heads,
            encoder_normalize_before=True,
        )
    return dict(decoder, **sides, dropout=0.1, attention_dropout=0.1, activation_dropout=0.1)


def build(spec: ModelSpec, settings: Settings, dictionary: Dictionary) -> nn.Module:
    """The model of ``spec`` at the run's width, seeded, on the run's device."""
    options = {**width_options(spec, settings), **spec.options}
    model = build_model(spec.arch, DictionaryTask(dictionary), seed=settings.seed, **options)
    return model.to(torch.device(settings.device))
