"""One forward pass of a translation model or a language model, and the tokens each stack reads.

A translation model runs as ``model(src_tokens, src_lengths, prev_output_tokens)``: its encoder's
states are the source positions, its decoder's the target prefix. A language model (a fairseq
``FairseqLanguageModel``, e.g. ``ode_transformer_lm``) runs as ``model(src_tokens)`` and has only
a decoder, whose states are the positions of ``src_tokens``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Optional, Tuple

from fairseq.models import FairseqLanguageModel
from torch import Tensor, nn


def is_language_model(model: nn.Module) -> bool:
    return isinstance(model, FairseqLanguageModel)


def model_stacks(model: nn.Module) -> Tuple[str, ...]:
    """The model's stacks in order: ("encoder", "decoder"), or ("decoder",) for a language model."""
    return ("decoder",) if is_language_model(model) else ("encoder", "decoder")


@dataclass(frozen=True)
class ModelPass:
    """The positional arguments of one ``model(...)`` call and, per stack, the (B, T) tokens
    whose positions that stack's states are."""

    args: Tuple[Tensor, ...]
    tokens: Dict[str, Tensor]

    def keep(self, pad: int) -> Dict[str, Tensor]:
        """Per stack the (T, B) mask of non-padding positions (states are time-major)."""
        return {stack: tokens.ne(pad).T for stack, tokens in self.tokens.items()}


def translation_pass(src_tokens: Tensor, prev_output_tokens: Tensor, src_lengths: Optional[Tensor] = None) -> ModelPass:
    """``src_lengths`` defaults to the full length of every row."""
    if src_lengths is None:
        src_lengths = src_tokens.new_full((src_tokens.size(0),), src_tokens.size(1))
    return ModelPass(
        (src_tokens, src_lengths, prev_output_tokens), {"encoder": src_tokens, "decoder": prev_output_tokens}
    )


def language_model_pass(tokens: Tensor) -> ModelPass:
    return ModelPass((tokens,), {"decoder": tokens})


def batch_pass(model: nn.Module, net_input: Dict[str, Tensor]) -> ModelPass:
    """The pass of fairseq's collated ``net_input`` for ``model``."""
    if is_language_model(model):
        return language_model_pass(net_input["src_tokens"])
    return translation_pass(net_input["src_tokens"], net_input["prev_output_tokens"], net_input["src_lengths"])
