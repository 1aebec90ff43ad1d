"""What the exported models' Runge–Kutta blocks share (M2M100's and XGLM's layers alike): the
solvers of a stack's blocks, the feed-forward sublayer and the decoder block with one
self-attention cache per (step, stage). Shipped in an exported folder with the files it imports
from ode-seq (copied unchanged: ``stack_solvers.py``, which builds the solvers as fairseq's stacks
do, the solver core and ``fields.py``) and loaded with ``trust_remote_code=True``.

A decoder block integrates the field F of its (pre-norm) layer over [0, T] in N steps,
k_i = F(z_n + h Σ_j a_ij k_j), z_{n+1} = z_n + h Σ_i w_i k_i, with w the tableau's b or the
trained coefficients (``combiner``), F built by ``fields.layer_field`` from the layer's sublayers
a = SelfAttn(LN₁ x), c = CrossAttn(LN₂ x) (encoder–decoder models only), f = FFN(LN₃ x); the
residual-branch form is F(z) = a + c + f(z + a + c) with a read at z and c at z + a.

With ``{side}_ode_corrector`` a stack takes PCformer's predictor–corrector steps
(``predictor_corrector.py``): the step above is the prediction P, one more evaluation F̂ = F(P)
(stage s) corrects it, ``multistep`` as y_{n+1} = y_n + h (α F̂ + Σ_{j=0}^{m} β_j k_1^{(n−j)})
over the first-stage values of the stack's steps so far (m = ``{side}_ode_corrector_history``;
α, β_j the block's ``corrector``), ``dlcl`` through the DLCL mixes of the stack's states (the
stack's ``corrector_states``). The history belongs to one pass over the stack at the current
positions: its first block starts it, and nothing of it is cached across time.

Evaluation i of step n (the s stages, then the corrector's) at position t attends to the keys and
values that evaluation computed at positions ≤ t, so decoding token by token equals the
teacher-forced pass: one self-attention cache per evaluation, kept side by side along the head axis
of the block's layer of transformers' cache (``stage_caches.py``, carried from
``ode_seq.transformers``, whose models keep their caches so too). Cross-attention keys and values
are the same for every stage and cached once per block.
"""

from typing import Any, List, Optional, Tuple

import torch
from torch import Tensor, nn
from transformers.cache_utils import EncoderDecoderCache

from .dlcl import StateHistory
from .fields import Sublayer, feed_forward, layer_field
from .fixed_grid import FixedGridSolver
from .stack_solvers import StackSolvers
from .stage_caches import StageCaches
from .tableaus import get_tableau


def stack_solvers(config: Any, side: str, blocks: int) -> Tuple[List[FixedGridSolver], Optional[StateHistory]]:
    """The solvers of the ``blocks`` blocks of ``side`` in order (``stack_solvers.py``, as fairseq's
    stacks build them): ``{side}_ode_method`` (a tableau of ``tableaus.py``), ``{side}_ode_steps`` N
    over [0, ``{side}_ode_interval``], the stage weights ``ode_coefficients`` (each block its own
    module, ``learned-shared`` included: the checkpoint holds each block's copy),
    ``{side}_ode_corrector``. Also the stack's DLCL states (``dlcl``: a module the stack registers
    as ``corrector_states``), else None."""
    solvers = StackSolvers(
        get_tableau(getattr(config, f"{side}_ode_method")),
        blocks,
        config.d_model,
        steps=getattr(config, f"{side}_ode_steps"),
        interval=float(getattr(config, f"{side}_ode_interval")),
        coefficients=config.ode_coefficients,
        corrector=getattr(config, f"{side}_ode_corrector", "none"),
        corrector_history=getattr(config, f"{side}_ode_corrector_history"),
        share_gate=False,
    )
    return [solvers.next() for _ in range(blocks)], solvers.states


def is_plain(config: Any, side: str) -> bool:
    """Whether ``side``'s blocks are Euler steps of size 1 (of the residual-branch field) without a
    corrector, i.e. transformers' own pre-norm layers."""
    return (
        getattr(config, f"{side}_ode_method") == "euler"
        and getattr(config, f"{side}_ode_steps") == 1
        and float(getattr(config, f"{side}_ode_interval")) == 1.0
        and getattr(config, f"{side}_ode_corrector", "none") == "none"
    )


class SharedSublayers:
    """What the blocks over transformers' pre-norm layers share: their solver's modules, dropouts
    and the FFN sublayer; the form of their field (``fields.py``)."""

    field_form: str = "residual-branch"

    def use_solver(self, solver: FixedGridSolver) -> None:
        """Integrate with ``solver``, registering its trained weights: the output combination as
        ``combiner``, a multistep corrector's α, β_j as ``corrector`` (fairseq's names)."""
        self.solver = solver
        self.combiner = solver.combine
        corrector = getattr(solver, "corrector", None)
        if corrector is not None:
            self.corrector = corrector

    def apply_dropout(self, x: Tensor) -> Tensor:
        return nn.functional.dropout(x, p=self.dropout, training=self.training)

    def apply_activation_dropout(self, x: Tensor) -> Tensor:
        return nn.functional.dropout(x, p=self.activation_dropout, training=self.training)

    def feed_forward_sublayer(self) -> Sublayer:
        """f(x) = Dropout(FFN(LN(x)))."""
        return Sublayer(
            lambda x: feed_forward(
                self.final_layer_norm(x),
                self.fc1,
                self.activation_fn,
                self.apply_activation_dropout,
                self.fc2,
                self.apply_dropout,
            )
        )


def causal_mask(x: Tensor, known: int) -> Optional[Tensor]:
    """The additive mask (batch × 1 × T × known+T) by which position i of ``x`` (T positions after
    ``known`` cached ones) attends to positions ≤ known + i; None for one position."""
    length = x.size(1)
    if length == 1:
        return None
    future = torch.ones(length, known + length, dtype=torch.bool, device=x.device).triu(known + 1)
    mask = torch.zeros(future.shape, dtype=x.dtype, device=x.device).masked_fill(future, torch.finfo(x.dtype).min)
    return mask.expand(x.size(0), 1, *future.shape)


class StageCachedDecoderBlock(SharedSublayers):
    """A Runge–Kutta block over a transformers pre-norm decoder layer (M2M100's or XGLM's: the
    same module names), one self-attention cache per (step, stage). The subclass's ``__init__``
    calls :meth:`init_block` after the layer's own."""

    def init_block(self, layer_idx: int, solver: FixedGridSolver, field_form: str = "residual-branch") -> None:
        self.layer_idx = layer_idx
        self.field_form = field_form
        self.use_solver(solver)

    def self_attention_mask(self, attention_mask: Optional[Tensor]) -> Optional[Tensor]:
        """The additive mask (batch × 1 × T × past+T) self-attention adds to its scores, given the
        layer's ``attention_mask``; None (here): the causal mask (:func:`causal_mask`) alone, for
        unpadded inputs."""
        return None

    def forward(
        self,
        hidden_states: Tensor,
        attention_mask: Optional[Tensor] = None,
        encoder_hidden_states: Optional[Tensor] = None,
        encoder_attention_mask: Optional[Tensor] = None,
        cache: Any = None,
        use_cache: Optional[bool] = True,
        **kwargs: Any,
    ) -> Tensor:
        self_cache = cache.self_attention_cache if isinstance(cache, EncoderDecoderCache) else cache
        evaluations = self.solver.evaluations_per_step
        caches = (
            None if self_cache is None else StageCaches(self_cache, self.layer_idx, self.solver.steps * evaluations)
        )
        mask = self.self_attention_mask(attention_mask)
        if mask is None:
            mask = causal_mask(hidden_states, 0 if self_cache is None else self_cache.get_seq_length(self.layer_idx))

        def cross_attention(x: Tensor) -> Tensor:
            c, _ = self.encoder_attn(
                hidden_states=self.encoder_attn_layer_norm(x),
                key_value_states=encoder_hidden_states,
                attention_mask=encoder_attention_mask,
                cache=cache,
                **kwargs,
            )
            return self.apply_dropout(c)

        others = [Sublayer(cross_attention)] if encoder_hidden_states is not None else []
        others.append(self.feed_forward_sublayer())

        def field(t: float, z: Tensor, step: int, stage: int) -> Tensor:
            """F(z) with the self-attention cache of (step, stage)."""

            def self_attention(x: Tensor) -> Tensor:
                slot = None if caches is None else caches.evaluation(step * evaluations + stage)
                a = self.self_attn(hidden_states=self.self_attn_layer_norm(x), cache=slot, attention_mask=mask)[0]
                return self.apply_dropout(a)

            return layer_field(self.field_form, z, [Sublayer(self_attention), *others])

        y = self.solver.solve(field, hidden_states)
        if caches is not None and use_cache:
            caches.commit()
        return y
