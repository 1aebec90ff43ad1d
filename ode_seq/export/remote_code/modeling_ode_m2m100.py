"""M2M100 with Runge–Kutta encoder blocks and the plain pre-norm decoder (the ODE Transformer
paper's setting), run by ode-seq's solver core (``fixed_grid.py``, ``tableaus.py``,
``coefficients.py``, copied from ``ode_seq/solvers``); shipped in an exported folder and loaded
with ``trust_remote_code=True``.

Each encoder block integrates the residual-branch field of its layer,
F(z) = a + f(z + a), a = SelfAttn(LN₁ z), f = FFN(LN₂(z + a)), over [0, T] in N steps:
k_i = F(z_n + h Σ_j a_ij k_j), z_{n+1} = z_n + h Σ_i w_i k_i, with w the tableau's b or the
trained coefficients (``combiner``).
"""
from typing import Any

from torch import Tensor, nn
from transformers import M2M100ForConditionalGeneration
from transformers.models.m2m_100.modeling_m2m_100 import M2M100EncoderLayer

from .coefficients import build_combiner
from .configuration_ode_m2m100 import ODEM2M100Config
from .fixed_grid import FixedGridSolver
from .tableaus import get_tableau


class ODEM2M100EncoderLayer(M2M100EncoderLayer):
    """A Runge–Kutta block over M2M100's (pre-norm) encoder layer."""

    def __init__(self, config: ODEM2M100Config) -> None:
        super().__init__(config)
        tableau = get_tableau(config.encoder_ode_method)
        mode = config.ode_coefficients if tableau.stages > 1 else "fixed"
        self.combiner = build_combiner(mode, tableau, config.d_model)
        self.solver = FixedGridSolver(
            tableau, steps=config.encoder_ode_steps, interval=float(config.encoder_ode_interval),
            combine=self.combiner,
        )

    def field(self, z: Tensor, attention_mask: Tensor, **kwargs: Any) -> Tensor:
        """F(z) = a + f(z + a): the layer's sublayer outputs without its identity paths."""
        a, _ = self.self_attn(hidden_states=self.self_attn_layer_norm(z), attention_mask=attention_mask, **kwargs)
        a = nn.functional.dropout(a, p=self.dropout, training=self.training)
        hidden = self.activation_fn(self.fc1(self.final_layer_norm(z + a)))
        hidden = nn.functional.dropout(hidden, p=self.activation_dropout, training=self.training)
        f = nn.functional.dropout(self.fc2(hidden), p=self.dropout, training=self.training)
        return a + f

    def forward(self, hidden_states: Tensor, attention_mask: Tensor, **kwargs: Any) -> Tensor:
        return self.solver.solve(lambda t, z, step, stage: self.field(z, attention_mask, **kwargs), hidden_states)


class ODEM2M100ForConditionalGeneration(M2M100ForConditionalGeneration):
    """M2M100ForConditionalGeneration whose encoder layers are :class:`ODEM2M100EncoderLayer`."""

    config_class = ODEM2M100Config

    def __init__(self, config: ODEM2M100Config) -> None:
        super().__init__(config)
        self.model.encoder.layers = nn.ModuleList(
            ODEM2M100EncoderLayer(config) for _ in range(config.encoder_layers)
        )
        self.post_init()
