"""The compared models: fairseq's ``transformer`` (pre-norm) and ``ode_transformer``, built the
way fairseq-train builds them, at one width and with the same dropout everywhere."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict

import torch
from fairseq.data import Dictionary
from torch import nn

import user_dir  # noqa: F401  (registers ode_transformer, applies the fairseq fixes)
from benchmarks.settings import Settings
from ode_seq.models.by_name import DictionaryTask, build_model


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


def build(spec: ModelSpec, settings: Settings, dictionary: Dictionary) -> nn.Module:
    """The model of ``spec`` at the run's width, seeded, on the run's device."""
    d = settings.embed_dim
    model = build_model(
        spec.arch,
        DictionaryTask(dictionary),
        seed=settings.seed,
        encoder_embed_dim=d,
        decoder_embed_dim=d,
        encoder_ffn_embed_dim=settings.ffn_dim,
        decoder_ffn_embed_dim=settings.ffn_dim,
        encoder_attention_heads=settings.heads,
        decoder_attention_heads=settings.heads,
        encoder_normalize_before=True,
        decoder_normalize_before=True,
        dropout=0.1,
        attention_dropout=0.1,
        activation_dropout=0.1,
        **spec.options,
    )
    return model.to(torch.device(settings.device))
