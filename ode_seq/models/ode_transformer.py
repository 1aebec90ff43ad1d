"""fairseq model ``ode_transformer``: ODE Transformer (Li et al., 2022) on fairseq's Transformer.

Each encoder/decoder layer becomes a Runge–Kutta block (:mod:`ode_seq.layers.blocks`) through
fairseq's ``build_encoder`` / ``build_decoder`` hooks; everything else is fairseq's. A model of
another layer kind is a subclass naming it in ``layer_kind``.
"""
from __future__ import annotations

from typing import ClassVar, List, Optional, Tuple

from fairseq.models import register_model
from fairseq.models.transformer import TransformerConfig, TransformerModel

from ode_seq.layers import LAYER_KINDS
from ode_seq.layers.blocks import BlockClasses
from ode_seq.options import add_arguments

from .config import ModelOptions, ODEOptions, StackOptions
from .stacks import ODETransformerDecoder, ODETransformerEncoder


@register_model("ode_transformer")
class ODETransformerModel(TransformerModel):
    """Transformer whose layers are Runge–Kutta blocks; see ``--encoder-ode-method``."""

    layer_kind: ClassVar[str] = "standard"

    @classmethod
    def block_classes(cls) -> BlockClasses:
        return LAYER_KINDS[cls.layer_kind]

    @classmethod
    def option_classes(cls) -> List[Tuple[type, Optional[str]]]:
        """(options class, side) of every option of the model beyond fairseq's Transformer."""
        kind_options = cls.block_classes().kind.options_class
        return [(StackOptions, "both"), (ODEOptions, None)] + (
            [(kind_options, None)] if kind_options else []
        )

    @classmethod
    def add_args(cls, parser) -> None:
        TransformerModel.add_args(parser)
        for options_class, side in cls.option_classes():
            add_arguments(parser, options_class, side)

    @classmethod
    def stack_inputs(cls, cfg) -> Tuple[TransformerConfig, ModelOptions, BlockClasses]:
        """fairseq's config, the model's ODE options (read and validated), the block classes."""
        cfg = TransformerConfig.from_namespace(cfg)
        classes = cls.block_classes()
        return cfg, ModelOptions.read(cfg, classes.kind), classes

    @classmethod
    def build_encoder(cls, cfg, src_dict, embed_tokens):
        cfg, options, classes = cls.stack_inputs(cfg)
        return ODETransformerEncoder(cfg, src_dict, embed_tokens, options, classes)

    @classmethod
    def build_decoder(cls, cfg, tgt_dict, embed_tokens):
        cfg, options, classes = cls.stack_inputs(cfg)
        return ODETransformerDecoder(
            cfg, tgt_dict, embed_tokens, options, classes, no_encoder_attn=cfg.no_cross_attention
        )
