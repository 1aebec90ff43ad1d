"""fairseq model ``ode_transformer_lm``: a decoder-only language model with Runge–Kutta blocks, for
fairseq's ``language_modeling`` task.

It is fairseq's ``transformer_lm`` (:class:`TransformerLanguageModel`: its options, input
embeddings, adaptive input and softmax, hub interface, ``fairseq-eval-lm`` and generation) whose
decoder is :class:`ODETransformerDecoder` without encoder attention: every layer a block of the
model's layer kind (``--layer-kind``), with one self-attention cache per (block, step, stage).
Only the decoder's ODE options exist (``--decoder-ode-method``, ``--decoder-ode-steps``,
``--ode-coefficients``, …).
"""

from __future__ import annotations

import ast
from typing import ClassVar, Tuple

from fairseq import utils
from fairseq.dataclass.utils import gen_parser_from_dataclass
from fairseq.models import register_model
from fairseq.models.transformer_lm import (
    DEFAULT_MAX_TARGET_POSITIONS,
    TransformerLanguageModel,
    TransformerLanguageModelConfig,
)
from fairseq.modules import AdaptiveInput, CharacterTokenEmbedder
from torch import nn

from .ode_transformer import ODEModel
from .stacks import ODETransformerDecoder


@register_model("ode_transformer_lm")
class ODETransformerLanguageModel(ODEModel, TransformerLanguageModel):
    """fairseq's ``transformer_lm`` whose layers are Runge–Kutta blocks; see ``--decoder-ode-method``."""

    stacks: ClassVar[Tuple[str, ...]] = ("decoder",)

    def __init__(self, args, decoder: ODETransformerDecoder) -> None:
        super().__init__(decoder)
        self.args = args

    @classmethod
    def add_fairseq_args(cls, parser) -> None:
        gen_parser_from_dataclass(parser, TransformerLanguageModelConfig(), delete_default=True)

    @classmethod
    def input_embeddings(cls, args, dictionary) -> nn.Module:
        """The token embeddings ``transformer_lm`` builds for the same options: character CNN
        (``--character-embeddings``), adaptive input (``--adaptive-input``) or one table."""
        if args.character_embeddings:
            return CharacterTokenEmbedder(
                dictionary,
                ast.literal_eval(args.character_filters),  # fairseq's option is a Python literal
                args.character_embedding_dim,
                args.decoder_embed_dim,
                args.char_embedder_highway_layers,
            )
        if args.adaptive_input:
            return AdaptiveInput(
                len(dictionary),
                dictionary.pad(),
                args.decoder_input_dim,
                args.adaptive_input_factor,
                args.decoder_embed_dim,
                utils.eval_str_list(args.adaptive_input_cutoff, type=int),
                args.quant_noise_pq,
                args.quant_noise_pq_block_size,
            )
        return cls.build_embedding(args, dictionary, args.decoder_input_dim)

    @staticmethod
    def check_adaptive_weights(args) -> None:
        """--tie-adaptive-weights shares adaptive input and softmax: their options must agree."""
        if not args.tie_adaptive_weights:
            return
        pairs = (
            ("--adaptive-input", True, args.adaptive_input),
            ("--adaptive-input-factor", args.adaptive_softmax_factor, args.adaptive_input_factor),
            ("--adaptive-input-cutoff", args.adaptive_softmax_cutoff, args.adaptive_input_cutoff),
            ("--decoder-input-dim", args.decoder_output_dim, args.decoder_input_dim),
        )
        for option, wanted, value in pairs:
            if value != wanted:
                raise ValueError(
                    f"--tie-adaptive-weights shares the adaptive input with the adaptive softmax, so "
                    f"{option} must be {wanted} (the softmax's), got {value}"
                )

    @classmethod
    def build_model(cls, args, task):
        """The model ``transformer_lm`` builds for ``args``, with the ODE decoder."""
        if args.decoder_layers_to_keep:
            args.decoder_layers = len(args.decoder_layers_to_keep.split(","))
        if getattr(args, "max_target_positions", None) is None:
            args.max_target_positions = getattr(args, "tokens_per_sample", DEFAULT_MAX_TARGET_POSITIONS)
        cls.check_adaptive_weights(args)
        embed_tokens = cls.input_embeddings(args, task.source_dictionary)
        cfg, options, classes = cls.stack_inputs(args)
        decoder = ODETransformerDecoder(
            cfg, task.target_dictionary, embed_tokens, options, classes, no_encoder_attn=True
        )
        return cls(args, decoder)
