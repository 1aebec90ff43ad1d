"""What the exported models' Runge–Kutta blocks share (M2M100's and XGLM's layers alike): the
solvers of a stack's blocks, the feed-forward sublayer and the decoder block with one
self-attention cache per (step, stage). Shipped in an exported folder with ``fixed_grid.py``,
``predictor_corrector.py``, ``tableaus.py``, ``coefficients.py`` and ``fields.py`` (copied from
ode-seq) and loaded with ``trust_remote_code=True``.

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
teacher-forced pass. The caches of all evaluations live in
the block's slot of transformers' cache, side by side along the head axis (so beam reordering
moves them together); cross-attention keys and values are the same for every stage and cached
once per block.
"""

from typing import Any, Dict, List, Optional, Tuple

import torch
from torch import Tensor, nn
from transformers.cache_utils import EncoderDecoderCache

from .coefficients import build_combiner
from .fields import Sublayer, feed_forward, layer_field
from .fixed_grid import FixedGridSolver
from .predictor_corrector import FirstStageHistory, MultistepCorrector, PredictorCorrectorSolver, StateHistory
from .tableaus import get_tableau


def stack_solvers(config: Any, side: str, blocks: int) -> Tuple[List[FixedGridSolver], Optional[StateHistory]]:
    """The solvers of the ``blocks`` blocks of ``side`` in order, each with a new output
    combination (``combine``): ``{side}_ode_method`` (a tableau of ``tableaus.py``),
    ``{side}_ode_steps`` N over [0, ``{side}_ode_interval``], the stage weights
    ``ode_coefficients``; with ``{side}_ode_corrector`` predictor–corrector steps sharing the
    stack's history, which the first block starts. Also the stack's DLCL states (``dlcl``: a module
    the stack registers as ``corrector_states``), else None."""
    tableau = get_tableau(getattr(config, f"{side}_ode_method"))
    mode = config.ode_coefficients if tableau.stages > 1 else "fixed"
    form = getattr(config, f"{side}_ode_corrector", "none")
    states = StateHistory(blocks, config.d_model) if form == "dlcl" else None
    first_stages = FirstStageHistory()

    def corrector(index: int) -> Dict[str, Any]:
        if form == "none":
            return {}
        if states is not None:
            return dict(states=states, starts_history=index == 0)
        history = getattr(config, f"{side}_ode_corrector_history")
        return dict(corrector=MultistepCorrector(history), history=first_stages, starts_history=index == 0)

    solver_class = FixedGridSolver if form == "none" else PredictorCorrectorSolver
    solvers = [
        solver_class(
            tableau,
            steps=getattr(config, f"{side}_ode_steps"),
            interval=float(getattr(config, f"{side}_ode_interval")),
            combine=build_combiner(mode, tableau, config.d_model),
            **corrector(index),
        )
        for index in range(blocks)
    ]
    return solvers, states


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
    and the FFN sublayer."""

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


class StageCachedDecoderBlock(SharedSublayers):
    """A Runge–Kutta block over a transformers pre-norm decoder layer (M2M100's or XGLM's: the
    same module names), one self-attention cache per (step, stage). The subclass's ``__init__``
    calls :meth:`init_block` after the layer's own."""

    field_form: str = "residual-branch"

    def init_block(self, layer_idx: int, solver: FixedGridSolver, field_form: str = "residual-branch") -> None:
        self.layer_idx = layer_idx
        self.field_form = field_form
        self.use_solver(solver)

    def self_attention_mask(self, attention_mask: Optional[Tensor]) -> Optional[Tensor]:
        """The additive mask (batch × 1 × T × past+T) self-attention adds to its scores, given the
        layer's ``attention_mask``; None (here): the causal mask alone, for unpadded inputs."""
        return None

    def self_attention(
        self,
        x: Tensor,
        slot: int,
        past: Optional[Tuple[Tensor, Tensor]],
        new: List[Tuple[Tensor, Tensor]],
        mask: Optional[Tensor],
    ) -> Tensor:
        """Self-attention of stage cache ``slot`` over its past keys/values and ``x``'s (appended
        to ``new``), transformers' projections and scaling; ``mask`` additive, else causal."""
        attn = self.self_attn
        batch, length, _ = x.shape
        heads = attn.num_heads

        def split(t: Tensor) -> Tensor:
            return t.view(batch, length, heads, attn.head_dim).transpose(1, 2)

        q, k, v = split(attn.q_proj(x) * attn.scaling), split(attn.k_proj(x)), split(attn.v_proj(x))
        new.append((k, v))
        if past is not None:
            k = torch.cat([past[0][:, slot * heads : (slot + 1) * heads], k], dim=2)
            v = torch.cat([past[1][:, slot * heads : (slot + 1) * heads], v], dim=2)
        scores = q @ k.transpose(-1, -2)
        if mask is not None:  # as XGLM's attention: added, then kept above the dtype's minimum
            scores = torch.max(scores + mask, torch.full((), torch.finfo(scores.dtype).min, device=x.device))
        elif length > 1:
            start = k.size(2) - length
            future = torch.ones(length, k.size(2), dtype=torch.bool, device=x.device).triu(start + 1)
            scores = scores.masked_fill(future, float("-inf"))
        weights = nn.functional.dropout(
            scores.float().softmax(-1).type_as(scores), p=attn.dropout, training=self.training
        )
        out = (weights @ v).transpose(1, 2).reshape(batch, length, -1)
        return attn.out_proj(out)

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
        past = None
        if self_cache is not None and self_cache.get_seq_length(self.layer_idx) > 0:
            layer = self_cache.layers[self.layer_idx]
            past = (layer.keys, layer.values)
        new: List[Tuple[Tensor, Tensor]] = []
        evaluations = self.solver.evaluations_per_step
        mask = self.self_attention_mask(attention_mask)

        def cross_attention(x: Tensor) -> Tensor:
            c, _ = self.encoder_attn(
                hidden_states=self.encoder_attn_layer_norm(x),
                key_value_states=encoder_hidden_states,
                attention_mask=encoder_attention_mask,
                cache=cache,
                **kwargs,
            )
            return self.apply_dropout(c)

        def field(t: float, z: Tensor, step: int, stage: int) -> Tensor:
            """F(z) with the self-attention cache of (step, stage)."""

            def self_attention(x: Tensor) -> Tensor:
                a = self.self_attention(self.self_attn_layer_norm(x), step * evaluations + stage, past, new, mask)
                return self.apply_dropout(a)

            sublayers = [Sublayer(self_attention)]
            if encoder_hidden_states is not None:
                sublayers.append(Sublayer(cross_attention))
            return layer_field(self.field_form, z, sublayers + [self.feed_forward_sublayer()])

        y = self.solver.solve(field, hidden_states)
        if self_cache is not None and use_cache:
            self_cache.update(
                torch.cat([k for k, _ in new], dim=1), torch.cat([v for _, v in new], dim=1), self.layer_idx
            )
        return y
