"""fairseq's encoder and decoder with Runge–Kutta blocks of one layer kind.

fairseq builds a stack's layers through its ``build_encoder_layer`` / ``build_decoder_layer``
hooks; here both hand the work to a :class:`BlockBuilder`, which builds every block of the stack
the same way. A weight-shared group of k layers is one block over [0, k], so the stack is given
``layers / k`` blocks; with a layer history (DLCL) the blocks are wrapped after fairseq built them.
A predictor-corrector stack's blocks share one history, which its first block starts.
"""

from __future__ import annotations

import copy
from typing import Any, Optional

from fairseq.distributed import fsdp_wrap
from fairseq.models.transformer import TransformerDecoderBase, TransformerEncoderBase
from fairseq.modules.checkpoint_activations import checkpoint_wrapper
from torch import nn

from ode_seq.layers.blocks import BlockClasses, BlockSpec
from ode_seq.layers.layer_history import HistoryBlock, PassStates, layer_history
from ode_seq.solvers import AdaptiveSolver, Solver, StackSolvers

from .config import ModelOptions


def _wrap(block: nn.Module, cfg: Any) -> nn.Module:
    """fairseq's own --checkpoint-activations / FSDP wrapping, applied to a whole block."""
    if cfg.checkpoint_activations:
        block = checkpoint_wrapper(block, offload_to_cpu=cfg.offload_activations)
    min_params = cfg.min_params_to_wrap if not cfg.checkpoint_activations else 0
    return fsdp_wrap(block, min_num_params=min_params)


class BlockBuilder:
    """Builds the blocks of one stack (fairseq's config of the grouped stack: ``cfg``), each with
    the next of the stack's solvers (:class:`~ode_seq.solvers.StackSolvers`, or an adaptive solver
    per block), names in build order."""

    def __init__(self, side: str, options: ModelOptions, classes: BlockClasses, cfg: Any) -> None:
        self.side = side
        self.stack = options.stack(side)
        self.ode = options.ode
        self.kind_options = options.kind
        self.block_class = classes.for_side(side)
        self.built = 0
        self.solvers: Optional[StackSolvers] = None
        if not self.stack.adaptive:
            layers = getattr(cfg, side)
            self.solvers = StackSolvers(
                self.stack.tableau,
                layers.layers,
                layers.embed_dim,
                steps=self.stack.steps,
                interval=self.stack.share_group_size,
                coefficients=self.ode.coefficients,
                corrector=self.stack.ode_corrector,
                corrector_history=self.stack.ode_corrector_history,
                checkpoint_stages=self.ode.checkpoint_stages,
                nodes=classes.kind.solver_nodes(self.stack.tableau),
            )

    def solver(self) -> Solver:
        if self.solvers is not None:
            return self.solvers.next()
        stack, ode = self.stack, self.ode
        interval = float(stack.share_group_size)
        return AdaptiveSolver(stack.ode_method, ode.rtol, ode.atol, ode.min_step, interval, ode.max_evaluations)

    def build(self, cfg: Any, **layer_options: Any) -> nn.Module:
        spec = BlockSpec(
            self.solver(),
            field_form=self.ode.field,
            scope=self.ode.scope,
            relative_positions=self.stack.relative_positions,
            check_finite=self.ode.check_finite,
            name=f"{self.side} block {self.built}",
            options=self.kind_options,
        )
        self.built += 1
        return _wrap(self.block_class(cfg, spec, **layer_options), cfg)


class ODEStack:
    """Mixin for fairseq's encoder and decoder: the block builder and the layer history."""

    side: str

    def _grouped(self, cfg: Any, options: ModelOptions, classes: BlockClasses) -> Any:
        """Set up the builder; returns cfg with one layer per share group."""
        self.ode = options.stack(self.side)
        grouped = cfg
        if self.ode.share_group_size != 1:
            grouped = copy.deepcopy(cfg)
            getattr(grouped, self.side).layers //= self.ode.share_group_size
        self.builder = BlockBuilder(self.side, options, classes, grouped)
        return grouped

    def _finish_stack(self, cfg: Any) -> None:
        """Register the corrector's state history (public-code form), wrap the layer history."""
        solvers = self.builder.solvers
        if solvers is not None and solvers.states is not None:
            self.corrector_states = solvers.states
        if self.ode.layer_history == "none":
            return
        blocks = list(self.layers)
        layers = getattr(cfg, self.side)
        kind = self.ode.layer_history
        self.layer_history = layer_history(kind, len(blocks), layers.embed_dim, layers.normalize_before)
        states = PassStates(self.layer_history)
        self.layers = nn.ModuleList(
            HistoryBlock(b, states, first=i == 0, last=i == len(blocks) - 1) for i, b in enumerate(blocks)
        )


class ODETransformerEncoder(ODEStack, TransformerEncoderBase):
    """fairseq's encoder with Runge–Kutta blocks."""

    side = "encoder"

    def __init__(self, cfg, dictionary, embed_tokens, options: ModelOptions, classes: BlockClasses) -> None:
        cfg = self._grouped(cfg, options, classes)
        super().__init__(cfg, dictionary, embed_tokens)
        self._finish_stack(cfg)

    def build_encoder_layer(self, cfg):
        return self.builder.build(cfg)


class ODETransformerDecoder(ODEStack, TransformerDecoderBase):
    """fairseq's decoder with Runge–Kutta blocks and per-stage incremental caches."""

    side = "decoder"

    def __init__(
        self,
        cfg,
        dictionary,
        embed_tokens,
        options: ModelOptions,
        classes: BlockClasses,
        no_encoder_attn: bool = False,
    ) -> None:
        cfg = self._grouped(cfg, options, classes)
        super().__init__(cfg, dictionary, embed_tokens, no_encoder_attn=no_encoder_attn)
        self._finish_stack(cfg)

    def build_decoder_layer(self, cfg, no_encoder_attn: bool = False):
        return self.builder.build(cfg, no_encoder_attn=no_encoder_attn)
