"""M2M100 with Runge–Kutta blocks, run by ode-seq's solver core (``fixed_grid.py``,
``tableaus.py``, ``coefficients.py``, copied from ``ode_seq/solvers``) and its layer field
(``fields.py``, copied from ``ode_seq/layers``); shipped in an exported folder and loaded with
``trust_remote_code=True``.

Each block integrates the residual-branch field of its (pre-norm) layer over [0, T] in N steps,
k_i = F(z_n + h Σ_j a_ij k_j), z_{n+1} = z_n + h Σ_i w_i k_i, with w the tableau's b or the
trained coefficients (``combiner``), F built by ``fields.residual_branch`` from M2M100's sublayers:

- encoder: F(z) = a + f(z + a), a = SelfAttn(LN₁ z), f = FFN(LN₂(z + a));
- decoder: F(z) = a + c + f(z + a + c), c = CrossAttn(LN₂(z + a)), f = FFN(LN₃(z + a + c)).

A decoder block keeps one self-attention cache per (step, stage): stage i of step n at position
t attends to the keys and values that stage computed at positions ≤ t, so decoding token by token
equals the teacher-forced pass. The caches of all stages live in the block's slot of
transformers' cache, side by side along the head axis (so beam reordering moves them together);
cross-attention keys and values are the same for every stage and cached once per block.
"""

from typing import Any, List, Optional, Tuple

import torch
from torch import Tensor, nn
from transformers import M2M100ForConditionalGeneration
from transformers.models.m2m_100.modeling_m2m_100 import M2M100DecoderLayer, M2M100EncoderLayer

from .coefficients import build_combiner
from .configuration_ode_m2m100 import ODEM2M100Config
from .fields import Sublayer, feed_forward, residual_branch
from .fixed_grid import FixedGridSolver
from .tableaus import get_tableau


def block_solver(config: ODEM2M100Config, side: str) -> FixedGridSolver:
    """The solver of one block of ``side``, with a new output combination (``combine``)."""
    tableau = get_tableau(getattr(config, f"{side}_ode_method"))
    mode = config.ode_coefficients if tableau.stages > 1 else "fixed"
    return FixedGridSolver(
        tableau,
        steps=getattr(config, f"{side}_ode_steps"),
        interval=float(getattr(config, f"{side}_ode_interval")),
        combine=build_combiner(mode, tableau, config.d_model),
    )


def is_plain(config: ODEM2M100Config, side: str) -> bool:
    """Whether ``side``'s blocks are Euler steps of size 1, i.e. M2M100's own layers."""
    return (
        getattr(config, f"{side}_ode_method") == "euler"
        and getattr(config, f"{side}_ode_steps") == 1
        and float(getattr(config, f"{side}_ode_interval")) == 1.0
    )


class SharedSublayers:
    """What the fields of M2M100's encoder and decoder layers share: dropouts and the FFN sublayer."""

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


class ODEM2M100EncoderLayer(SharedSublayers, M2M100EncoderLayer):
    """A Runge–Kutta block over M2M100's (pre-norm) encoder layer."""

    def __init__(self, config: ODEM2M100Config) -> None:
        super().__init__(config)
        self.solver = block_solver(config, "encoder")
        self.combiner = self.solver.combine

    def field(self, z: Tensor, attention_mask: Tensor, **kwargs: Any) -> Tensor:
        """F(z) = a + f(z + a), a(x) = Dropout(SelfAttn(LN₁ x))."""

        def attention(x: Tensor) -> Tensor:
            a, _ = self.self_attn(hidden_states=self.self_attn_layer_norm(x), attention_mask=attention_mask, **kwargs)
            return self.apply_dropout(a)

        return residual_branch(z, [Sublayer(attention), self.feed_forward_sublayer()])

    def forward(self, hidden_states: Tensor, attention_mask: Tensor, **kwargs: Any) -> Tensor:
        return self.solver.solve(lambda t, z, step, stage: self.field(z, attention_mask, **kwargs), hidden_states)


class ODEM2M100DecoderLayer(SharedSublayers, M2M100DecoderLayer):
    """A Runge–Kutta block over M2M100's (pre-norm) decoder layer, one cache per (step, stage)."""

    def __init__(self, config: ODEM2M100Config, layer_idx: int) -> None:
        super().__init__(config, layer_idx)
        self.layer_idx = layer_idx
        self.solver = block_solver(config, "decoder")
        self.combiner = self.solver.combine

    def self_attention(
        self, x: Tensor, slot: int, past: Optional[Tuple[Tensor, Tensor]], new: List[Tuple[Tensor, Tensor]]
    ) -> Tensor:
        """Causal self-attention of stage cache ``slot`` over its past keys/values and ``x``'s
        (appended to ``new``); M2M100's projections and scaling."""
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
        if length > 1:
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
        self_cache = getattr(cache, "self_attention_cache", None)
        past = None
        if self_cache is not None and self_cache.get_seq_length(self.layer_idx) > 0:
            layer = self_cache.layers[self.layer_idx]
            past = (layer.keys, layer.values)
        new: List[Tuple[Tensor, Tensor]] = []
        stages = self.solver.tableau.stages

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
            """F(z) = a + c + f(z + a + c) with the self-attention cache of (step, stage)."""

            def self_attention(x: Tensor) -> Tensor:
                a = self.self_attention(self.self_attn_layer_norm(x), step * stages + stage, past, new)
                return self.apply_dropout(a)

            sublayers = [Sublayer(self_attention), Sublayer(cross_attention), self.feed_forward_sublayer()]
            return residual_branch(z, sublayers)

        y = self.solver.solve(field, hidden_states)
        if self_cache is not None and use_cache:
            self_cache.update(
                torch.cat([k for k, _ in new], dim=1), torch.cat([v for _, v in new], dim=1), self.layer_idx
            )
        return y


class ODEM2M100ForConditionalGeneration(M2M100ForConditionalGeneration):
    """M2M100ForConditionalGeneration whose layers are Runge–Kutta blocks where the config says so."""

    config_class = ODEM2M100Config

    def __init__(self, config: ODEM2M100Config) -> None:
        super().__init__(config)
        if not is_plain(config, "encoder"):
            self.model.encoder.layers = nn.ModuleList(
                ODEM2M100EncoderLayer(config) for _ in range(config.encoder_layers)
            )
        if not is_plain(config, "decoder"):
            self.model.decoder.layers = nn.ModuleList(
                ODEM2M100DecoderLayer(config, i) for i in range(config.decoder_layers)
            )
        self.post_init()
