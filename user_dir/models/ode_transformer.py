"""fairseq model ``ode_transformer``: ODE Transformer (Li et al., 2022) on fairseq's Transformer.

Each encoder/decoder layer becomes a Runge–Kutta block (:mod:`ode_seq.blocks`) through the
``build_encoder_layer`` / ``build_decoder_layer`` hooks; everything else is fairseq's.
"""
from __future__ import annotations

import copy

from fairseq.distributed import fsdp_wrap
from fairseq.models import register_model
from fairseq.models.transformer import (
    TransformerConfig,
    TransformerDecoderBase,
    TransformerEncoderBase,
    TransformerModel,
)
from fairseq.modules.checkpoint_activations import checkpoint_wrapper
from torch import nn

from ode_seq.adaptive import ADAPTIVE_METHODS
from ode_seq.blocks import DecoderODEBlock, EncoderODEBlock, HistoryBlock, Integration
from ode_seq.coefficients import COEFFICIENT_MODES, StageGate, build_combiner
from ode_seq.config import ODEStackConfig, validate_model
from ode_seq.fields import FIELD_FORMS
from ode_seq.layer_history import HISTORY_TYPES, LayerHistory
from ode_seq.tableaus import TABLEAUS


def add_ode_args(parser) -> None:
    """Options of ODE stacks. No argparse defaults: the architecture's values apply."""
    for side, default in (("encoder", "the architecture's, e.g. rk4"), ("decoder", "euler")):
        methods = tuple(TABLEAUS) + (ADAPTIVE_METHODS if side == "encoder" else ())
        parser.add_argument(
            f"--{side}-ode-method", choices=methods, metavar="METHOD",
            help=f"method of each {side} block: {', '.join(methods)} (default: {default})",
        )
        parser.add_argument(
            f"--{side}-ode-steps", type=int, metavar="N",
            help=f"fixed-grid steps per {side} block (default: the share group size, i.e. "
            "step size 1); may be changed at generation time with --model-overrides",
        )
        parser.add_argument(
            f"--{side}-share-group-size", type=int, metavar="K",
            help=f"share one layer across each group of K {side} layers, integrated over "
            "[0, K] (default: 1, no sharing)",
        )
        parser.add_argument(
            f"--{side}-layer-history", choices=HISTORY_TYPES,
            help=f"DLCL aggregation of previous {side} block outputs (default: none)",
        )
        parser.add_argument(
            f"--{side}-relative-positions", type=int, metavar="K",
            help=f"Shaw relative position keys clipped at +-K in {side} self-attention "
            "(0 = off; default: the architecture's)",
        )
    parser.add_argument(
        "--ode-coefficients", choices=COEFFICIENT_MODES,
        help="output weights of multi-stage blocks: fixed (tableau b), learned (per-block "
        "per-token gate; sigmoid gate for 2 stages), learned-shared (one gate for a stack), "
        "free (trainable, init b), free-ones (trainable, init 1) (default: fixed)",
    )
    parser.add_argument(
        "--ode-field", choices=FIELD_FORMS,
        help="vector field F: residual-branch = layer minus identity (paper; Euler is the "
        "pre-norm layer) or whole-layer = layer with residuals (public code) "
        "(default: residual-branch)",
    )
    parser.add_argument("--ode-rtol", type=float, help="adaptive solver rtol (default: 1e-3)")
    parser.add_argument("--ode-atol", type=float, help="adaptive solver atol (default: 1e-4)")
    parser.add_argument(
        "--ode-min-step", type=float, help="adaptive solver minimum step size (default: 0)"
    )
    parser.add_argument(
        "--ode-check-finite", action="store_true",
        help="check every Runge-Kutta stage output for inf/nan and report the block, step, "
        "stage and method (an error in fp32; a warning in fp16/bf16, where fairseq's loss "
        "scaler handles overflow)",
    )
    parser.add_argument(
        "--ode-checkpoint-stages", action="store_true",
        help="recompute each Runge-Kutta stage in the backward pass (keeps stage inputs only)",
    )


def _build_combiner(stack: "ODEStackMixin", embed_dim: int) -> nn.Module:
    ode = stack.ode
    mode = ode.stack_coefficients
    shared = None
    if mode == "learned-shared":
        if "_shared_gate" not in stack.__dict__:
            stack.__dict__["_shared_gate"] = StageGate(ode.tableau.stages, embed_dim)
        shared = stack.__dict__["_shared_gate"]
    return build_combiner(mode, ode.tableau, embed_dim, shared_gate=shared)


def _wrap(layer: nn.Module, cfg) -> nn.Module:
    """fairseq's own --checkpoint-activations / FSDP wrapping, applied to a whole block."""
    if cfg.checkpoint_activations:
        layer = checkpoint_wrapper(layer, offload_to_cpu=cfg.offload_activations)
    min_params = cfg.min_params_to_wrap if not cfg.checkpoint_activations else 0
    return fsdp_wrap(layer, min_num_params=min_params)


class ODEStackMixin:
    """Shared by encoder and decoder: config validation and DLCL wrapping of the blocks."""

    ode: ODEStackConfig

    def _init_ode(self, cfg, side: str):
        """Validate this stack's options; returns cfg with one layer per share group."""
        self.ode = ODEStackConfig.from_args(cfg, side)
        self.ode.validate(
            normalize_before=getattr(cfg, side).normalize_before,
            checkpoint_activations=cfg.checkpoint_activations,
            layers=getattr(cfg, side).layers,
        )
        if self.ode.share_group_size == 1:
            return cfg
        grouped = copy.deepcopy(cfg)
        getattr(grouped, side).layers //= self.ode.share_group_size
        return grouped

    def _integration(self) -> Integration:
        ode = self.ode
        return Integration(
            tableau=ode.tableau,
            steps=ode.step_count,
            interval=float(ode.share_group_size),
            checkpoint_stages=ode.checkpoint_stages,
            adaptive=ode.adaptive_solver(),
            check_finite=ode.check_finite,
        )

    def _name_block(self, block: nn.Module) -> nn.Module:
        built = self.__dict__.get("_blocks_built", 0)
        self.__dict__["_blocks_built"] = built + 1
        block.name = f"{self.ode.side} block {built}"
        return block

    def _wrap_history(self, cfg, side: str) -> None:
        if self.ode.layer_history == "none":
            return
        blocks = list(self.layers)
        self.layer_history = LayerHistory(
            self.ode.layer_history,
            len(blocks),
            getattr(cfg, side).embed_dim,
            getattr(cfg, side).normalize_before,
        )
        wrapped = [
            HistoryBlock(b, self.layer_history, first=i == 0, last=i == len(blocks) - 1)
            for i, b in enumerate(blocks)
        ]
        self.layers = nn.ModuleList(wrapped)


class ODETransformerEncoder(ODEStackMixin, TransformerEncoderBase):
    """fairseq's encoder with Runge–Kutta blocks (``block_class``: the hook for other fields)."""

    block_class = EncoderODEBlock

    def __init__(self, cfg, dictionary, embed_tokens) -> None:
        cfg = self._init_ode(cfg, "encoder")
        super().__init__(cfg, dictionary, embed_tokens)
        self._wrap_history(cfg, "encoder")

    def build_encoder_layer(self, cfg):
        block = self.block_class(
            cfg,
            self._integration(),
            _build_combiner(self, cfg.encoder.embed_dim),
            field_form=self.ode.field,
            relative_positions=self.ode.relative_positions,
        )
        return _wrap(self._name_block(block), cfg)


class ODETransformerDecoder(ODEStackMixin, TransformerDecoderBase):
    """fairseq's decoder with Runge–Kutta blocks and per-stage incremental caches."""

    block_class = DecoderODEBlock

    def __init__(self, cfg, dictionary, embed_tokens, no_encoder_attn: bool = False) -> None:
        cfg = self._init_ode(cfg, "decoder")
        super().__init__(cfg, dictionary, embed_tokens, no_encoder_attn=no_encoder_attn)
        self._wrap_history(cfg, "decoder")

    def build_decoder_layer(self, cfg, no_encoder_attn: bool = False):
        block = self.block_class(
            cfg,
            self._integration(),
            _build_combiner(self, cfg.decoder.embed_dim),
            field_form=self.ode.field,
            relative_positions=self.ode.relative_positions,
            no_encoder_attn=no_encoder_attn,
        )
        return _wrap(self._name_block(block), cfg)


@register_model("ode_transformer")
class ODETransformerModel(TransformerModel):
    """Transformer whose layers are Runge–Kutta blocks; see ``--encoder-ode-method``.

    Model families with other vector fields subclass it and set ``encoder_class`` /
    ``decoder_class`` (whose ``block_class`` builds their blocks).
    """

    encoder_class = ODETransformerEncoder
    decoder_class = ODETransformerDecoder

    @staticmethod
    def add_args(parser) -> None:
        TransformerModel.add_args(parser)
        add_ode_args(parser)

    @classmethod
    def build_model(cls, args, task):
        validate_model(
            ODEStackConfig.from_args(args, "encoder"), ODEStackConfig.from_args(args, "decoder")
        )
        return super().build_model(args, task)

    @classmethod
    def build_encoder(cls, args, src_dict, embed_tokens):
        return cls.encoder_class(TransformerConfig.from_namespace(args), src_dict, embed_tokens)

    @classmethod
    def build_decoder(cls, args, tgt_dict, embed_tokens):
        cfg = TransformerConfig.from_namespace(args)
        return cls.decoder_class(
            cfg, tgt_dict, embed_tokens, no_encoder_attn=cfg.no_cross_attention
        )
