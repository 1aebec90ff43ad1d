"""Runge–Kutta blocks: one Transformer layer's parameters reused at every stage and step.

    y_{n+1} = y_n + h Σ_i w_i k_i,    k_i = F(t_n + c_i h, y_n + h Σ_{j<i} a_ij k_j),    n = 0 … N−1

A block integrates the field F of its layer (:mod:`.fields`) over [0, T] with its solver
(:mod:`ode_seq.solvers`): the ODE Transformer block is one step over [0, 1], a weight-shared
group of k layers is N steps over [0, k], an encoder block may solve adaptively. With scope
``sublayer`` (RK-sublayer) each step updates the sublayers one after the other, each by the
method on its own field (:mod:`.sublayers`); ``block`` (RK-block, the default) integrates F.

A block *is* fairseq's layer (a subclass), so it keeps the layer's call signature and parameter
names: fairseq's encoder/decoder loops run it unchanged and a vanilla pre-norm checkpoint loads
into an ODE model (only the coefficient parameters are new). fairseq's layer builds the modules;
a block's forward names the field and the solve (the layer's own ``forward`` is not used)::

    field = self.vector_field(encoder_padding_mask, attn_mask)   # F(t, z, step, stage)
    return self.solve(field, x, encoder_padding_mask)

F is a :class:`LayerField`, the field form (:mod:`.fields`) of the layer's sublayers
(:mod:`.sublayers`), made once per solve unless they change between evaluations (a kind's weights
θ(t), a decoder's per-stage caches); ``field(z, inputs, t=t)`` evaluates it once. Every block is
built the same way, ``Block(cfg, BlockSpec(...))``; a layer kind (:mod:`.kind`) changes what the layer is made of
or the weights θ(t) F uses, and :func:`register_layer_kind` makes its encoder and decoder classes.
"""

from __future__ import annotations

import collections
import logging
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Union

import torch
from fairseq.incremental_decoding_utils import with_incremental_state
from fairseq.logging import metrics
from fairseq.modules.transformer_layer import (
    TransformerDecoderLayerBase,
    TransformerEncoderLayerBase,
)
from torch import Tensor, nn
from torch.utils.hooks import RemovableHandle

from ode_seq.solvers import (
    AdaptiveSolveError,
    AdaptiveSolver,
    EvaluationCounter,
    FixedGridSolver,
    ObserverGroup,
    SolveObserver,
    Solver,
    SplitField,
    VectorField,
)

from ..fields import Sublayer, layer_field
from .kind import LayerKind
from .relative_attention import RelativePositionSelfAttention
from .stage_caches import IncrementalState, reorder_stage_states, stage_state
from .sublayers import LayerWithWeights, check_sublayer_layer, decoder_sublayers, encoder_sublayers

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class BlockSpec:
    """What makes a Runge–Kutta block besides fairseq's layer configuration.

    ``solver``: how the block integrates (a fixed-grid solver's ``combine`` module, if any,
    becomes the block's ``combiner``, a predictor-corrector's multistep weights its
    ``corrector``); ``field_form``: see :mod:`.fields`;
    ``relative_positions``: Shaw keys clipped at ±K (0 = off); ``check_finite``: report a
    non-finite stage output; ``name``: how messages call the block; ``options``: the layer kind's
    options (an instance of its ``options_class``); ``scope``: ``block`` (one Runge–Kutta update
    of the whole layer's F) or ``sublayer`` (one per sublayer, :mod:`.sublayers`; a fixed grid and
    the residual-branch field; the block's output weights serve every sublayer).
    """

    solver: Solver
    field_form: str = "residual-branch"
    scope: str = "block"
    relative_positions: int = 0
    check_finite: bool = False
    name: str = "ODE block"
    options: Any = None


class FiniteCheck(SolveObserver):
    """A non-finite stage output k_i, reported with block, step, stage and method: float32/64
    raise FloatingPointError; float16/bfloat16 log a warning (fairseq's loss scaler handles it)."""

    def __init__(self, name: str, method: str) -> None:
        self.name = name
        self.method = method

    def stage_evaluated(self, step: int, stage: int, t: float, z: Tensor, k: Tensor) -> None:
        if torch.isfinite(k).all():
            return
        message = (
            f"non-finite value in {self.name}, step {step}, stage {stage + 1} of method "
            f"{self.method} (dtype {k.dtype}): the layer's output k_{stage + 1} holds inf/nan"
        )
        if k.dtype in (torch.float16, torch.bfloat16):
            logger.warning(message)
        else:
            raise FloatingPointError(message)


class LoggedEvaluations(EvaluationCounter):
    """Logs the field evaluations of every solve as fairseq metric ``name``."""

    def __init__(self, name: str) -> None:
        self.name = name

    def solve_finished(self, y: Tensor) -> None:
        metrics.log_scalar(self.name, self.count, weight=1, round=1)


SublayersAt = Callable[[float, int, int], List[Sublayer]]
"""(t, step, stage) ↦ the sublayers of F at that evaluation."""


@dataclass(frozen=True)
class LayerField:
    """F(t, z, step, stage): the field ``form`` (:mod:`.fields`) of the sublayers at that evaluation."""

    form: str
    sublayers: SublayersAt
    stream_scale: float = 1.0

    def __call__(self, t: float, z: Tensor, step: int, stage: int) -> Tensor:
        return layer_field(self.form, z, self.sublayers(t, step, stage), self.stream_scale)


@dataclass(frozen=True)
class SublayerField:
    """F_i(t, z, step, stage) = s_i(z): sublayer i's own field (RK-sublayer blocks)."""

    sublayers: SublayersAt
    index: int

    def __call__(self, t: float, z: Tensor, step: int, stage: int) -> Tensor:
        return self.sublayers(t, step, stage)[self.index].branch(z)


class ODEBlock(LayerKind):
    """What encoder and decoder blocks share: the spec, the solver, the observers and F.

    fairseq's layer ``__init__`` builds the modules (through its ``build_*`` hooks, which a kind
    may override); then the block replaces self-attention by relative-position attention if asked,
    the kind checks the options and finishes the layer (:mod:`.kind`).
    """

    stream_scale: float = 1.0
    """h of the residual-branch field F_h (:mod:`.fields`)."""

    def __init__(self, cfg: Any, spec: BlockSpec, **layer_options: Any) -> None:
        super().__init__(cfg, **layer_options)
        self.spec = spec
        self.field_form = spec.field_form
        self.relative_positions = spec.relative_positions
        self.solver = spec.solver
        self.check_layer_options(cfg)
        if spec.relative_positions > 0:
            self.self_attn = RelativePositionSelfAttention(
                self.embed_dim,
                getattr(cfg, self.side).attention_heads,
                max_relative_position=spec.relative_positions,
                dropout=cfg.attention_dropout,
            )
        if spec.scope == "sublayer":
            check_sublayer_layer(self, cfg)
        combine = getattr(spec.solver, "combine", None)
        if isinstance(combine, nn.Module):
            self.combiner = combine
        corrector = getattr(spec.solver, "corrector", None)
        if corrector is not None:
            self.corrector = corrector
        self._observers: Dict[int, SolveObserver] = collections.OrderedDict()
        if spec.check_finite:
            self.register_observer(FiniteCheck(spec.name, spec.solver.method))
        if isinstance(spec.solver, AdaptiveSolver):
            self.register_observer(LoggedEvaluations(f"{self.side}_nfe"))
        self.finish_layer(cfg)

    def layer_at(self, t: float) -> Any:
        """The layer whose modules make F at solver time t: the block itself, or the block with
        the kind's weights θ(t) (:meth:`~.kind.LayerKind.field_weights`)."""
        weights = self.field_weights(t)
        return self if weights is None else LayerWithWeights(self, weights)

    @staticmethod
    def sublayers_of(layer: Any, *args: Any, **kwargs: Any) -> List[Sublayer]:
        """The sublayers of ``layer`` (:mod:`.sublayers`), for the other inputs of ``forward``."""
        raise NotImplementedError

    def sublayers(self, t: float, *args: Any, **kwargs: Any) -> List[Sublayer]:
        """The sublayers of F at solver time t, for the other inputs of ``forward``."""
        return self.sublayers_of(self.layer_at(t), *args, **kwargs)

    def field(self, z: Tensor, *args: Any, t: float = 0.0, **kwargs: Any) -> Tensor:
        """F(z) at solver time t, for the other inputs of ``forward`` (see :mod:`.fields`)."""
        return layer_field(self.field_form, z, self.sublayers(t, *args, **kwargs), self.stream_scale)

    def sublayers_at(self, inputs: Callable[[int, int], Dict[str, Any]], per_stage: bool = False) -> SublayersAt:
        """(t, step, stage) ↦ the sublayers of F with the other inputs ``inputs(step, stage)``, made
        once unless they change between evaluations (``per_stage`` inputs, the kind's θ(t))."""
        if per_stage or self.time_dependent_weights:
            return lambda t, step, stage: self.sublayers(t, **inputs(step, stage))
        made = self.sublayers(0.0, **inputs(0, 0))
        return lambda t, step, stage: made

    def _vector_field(
        self, inputs: Callable[[int, int], Dict[str, Any]], per_stage: bool = False
    ) -> Union[VectorField, SplitField]:
        """F(t, z, step, stage) with the other inputs ``inputs(step, stage)`` (``per_stage``: they
        change between evaluations); with scope ``sublayer`` the split field of the sublayers'
        branches."""
        at = self.sublayers_at(inputs, per_stage)
        if self.spec.scope == "block":
            return LayerField(self.field_form, at, self.stream_scale)
        return SplitField(tuple(SublayerField(at, i) for i in range(len(at(0.0, 0, 0)))))

    def register_observer(self, observer: SolveObserver) -> RemovableHandle:
        """Let ``observer`` see every solve of this block until the handle is removed."""
        handle = RemovableHandle(self._observers)
        self._observers[handle.id] = observer
        return handle

    def observer(self) -> Optional[SolveObserver]:
        """The registered observers as one, or None."""
        return ObserverGroup(self._observers.values()) if self._observers else None

    def vector_field(self, *args: Any, **kwargs: Any) -> Union[VectorField, SplitField]:
        """F(t, z, step, stage) for the other inputs of ``forward(x, *args, **kwargs)``; with
        scope ``sublayer`` the split field of the sublayers."""
        raise NotImplementedError

    def solve(self, field: Union[VectorField, SplitField], x: Tensor, padding_mask: Optional[Tensor] = None) -> Tensor:
        """y(T) of the solver from y(0) = x, told to the observers; an adaptive solve that cannot
        meet its tolerances is reported with the block's name and the options that loosen them."""
        try:
            return self.solver.solve(field, x, self.observer(), padding_mask)
        except AdaptiveSolveError as error:
            raise AdaptiveSolveError(
                f"{self.spec.name}: {error}; the tolerances are too tight for this model: loosen "
                "them (--ode-rtol, --ode-atol; the defaults are 1e-3 and 1e-4), set a minimum step "
                "(--ode-min-step) or allow more evaluations (--ode-max-evaluations)"
            ) from None

    def step_map(self, step: int, *args: Any, **kwargs: Any) -> Callable[[Tensor], Tensor]:
        """y_n ↦ y_{n+1} for n = ``step`` of a fixed grid, other inputs as in ``forward``."""
        field = self.vector_field(*args, **kwargs)
        return lambda y: self.solver.step(field, y, step)

    def extra_repr(self) -> str:
        steps = getattr(self.solver, "steps", "adaptive")
        return f"method={self.solver.method}, steps={steps}, interval={self.solver.interval}"


class EncoderBlock(ODEBlock, TransformerEncoderLayerBase):
    """Encoder block; called like fairseq's encoder layer: (x, encoder_padding_mask, attn_mask)."""

    side = "encoder"

    sublayers_of = staticmethod(encoder_sublayers)

    def vector_field(
        self, encoder_padding_mask: Optional[Tensor] = None, attn_mask: Optional[Tensor] = None
    ) -> Union[VectorField, SplitField]:
        inputs = dict(encoder_padding_mask=encoder_padding_mask, attn_mask=attn_mask)
        return self._vector_field(lambda step, stage: inputs)

    def forward(
        self,
        x: Tensor,
        encoder_padding_mask: Optional[Tensor] = None,
        attn_mask: Optional[Tensor] = None,
    ) -> Tensor:
        field = self.vector_field(encoder_padding_mask, attn_mask)
        return self.solve(field, x, encoder_padding_mask)


@with_incremental_state
class DecoderBlock(ODEBlock, TransformerDecoderLayerBase):
    """Decoder block with one self-attention cache per (step, stage); returns (x, attention, None).

    The cross-attention it returns (for alignments) is the average over stages.
    """

    side = "decoder"

    def __init__(self, cfg: Any, spec: BlockSpec, no_encoder_attn: bool = False) -> None:
        if not isinstance(spec.solver, FixedGridSolver):
            raise TypeError("a decoder block needs a fixed-grid solver (incremental decoding)")
        super().__init__(cfg, spec, no_encoder_attn=no_encoder_attn)

    sublayers_of = staticmethod(decoder_sublayers)

    def vector_field(
        self,
        encoder_out: Optional[Tensor] = None,
        encoder_padding_mask: Optional[Tensor] = None,
        incremental_state: Optional[IncrementalState] = None,
        prev_self_attn_state: Optional[List[Tensor]] = None,
        prev_attn_state: Optional[List[Tensor]] = None,
        attentions: Optional[List[Tensor]] = None,
        **layer_inputs: Any,
    ) -> Union[VectorField, SplitField]:
        """F at (step, stage) with that stage's cache; appends each attention to ``attentions``."""
        if prev_self_attn_state is not None or prev_attn_state is not None:
            raise ValueError("ODE decoder blocks keep one cache per stage and cannot take prev_*_attn_state")
        shared = self.encoder_attn if self.share_cross_attention else None

        def inputs(step: int, stage: int) -> Dict[str, Any]:
            state = None
            if incremental_state is not None:
                state = stage_state(self, incremental_state, step, stage, shared)
            return dict(
                encoder_out=encoder_out,
                encoder_padding_mask=encoder_padding_mask,
                incremental_state=state,
                attentions=attentions,
                **layer_inputs,
            )

        return self._vector_field(inputs, per_stage=incremental_state is not None)

    def forward(self, x: Tensor, *args: Any, **kwargs: Any):
        attentions: List[Tensor] = []
        y = self.solve(self.vector_field(*args, attentions=attentions, **kwargs), x)
        attn = torch.stack(attentions).mean(dim=0) if attentions else None
        return y, attn, None

    def reorder_incremental_state(self, incremental_state: IncrementalState, new_order: Tensor) -> None:
        reorder_stage_states(
            self,
            incremental_state,
            self.solver.steps,
            self.solver.evaluations_per_step,
            self.self_attn,
            self.encoder_attn,
            new_order,
            self.share_cross_attention,
        )


def ode_blocks(stack: nn.Module) -> List[ODEBlock]:
    """The Runge–Kutta blocks of an encoder or decoder, in order (wrappers looked through)."""
    return [m for m in stack.modules() if isinstance(m, ODEBlock)]


@dataclass(frozen=True)
class BlockClasses:
    """A layer kind (its :class:`LayerKind` mixin) and its encoder and decoder block classes."""

    kind: type
    encoder: type
    decoder: type

    def for_side(self, side: str) -> type:
        return self.encoder if side == "encoder" else self.decoder


LAYER_KINDS: Dict[str, BlockClasses] = {"standard": BlockClasses(LayerKind, EncoderBlock, DecoderBlock)}


def register_layer_kind(name: str) -> Callable[[type], type]:
    """Class decorator: register the :class:`LayerKind` mixin as kind ``name``, with encoder and
    decoder block classes ``<Kind>EncoderBlock`` and ``<Kind>DecoderBlock``."""

    def register(kind: type) -> type:
        if not issubclass(kind, LayerKind):
            raise TypeError(f"layer kind {name!r}: {kind.__name__} is not a LayerKind")
        classes = [
            type(f"{kind.__name__}{base.__name__}", (kind, base), {"__module__": kind.__module__})
            for base in (EncoderBlock, DecoderBlock)
        ]
        LAYER_KINDS[name] = BlockClasses(kind, *classes)
        return kind

    return register
