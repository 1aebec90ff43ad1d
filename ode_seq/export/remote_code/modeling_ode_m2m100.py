"""M2M100 with Runge–Kutta blocks, run by ode-seq's solver core (``fixed_grid.py``,
``tableaus.py``, ``coefficients.py``, copied from ``ode_seq/solvers``) and its layer field
(``fields.py``, copied from ``ode_seq/layers``); shipped in an exported folder and loaded with
``trust_remote_code=True``.

Each block integrates the residual-branch field of its (pre-norm) layer over [0, T] in N steps
(``ode_layers.py``), F built by ``fields.layer_field`` from M2M100's sublayers:

- encoder: F(z) = a + f(z + a), a = SelfAttn(LN₁ z), f = FFN(LN₂(z + a));
- decoder: F(z) = a + c + f(z + a + c), c = CrossAttn(LN₂(z + a)), f = FFN(LN₃(z + a + c)),
  with one self-attention cache per (step, stage) (``ode_layers.StageCachedDecoderBlock``).

With ``{side}_ode_corrector`` the blocks of a stack take PCformer's predictor–corrector steps
(``predictor_corrector.py``, see ``ode_layers.py``).
"""

from typing import Any

from torch import Tensor, nn
from transformers import M2M100ForConditionalGeneration
from transformers.models.m2m_100.modeling_m2m_100 import M2M100DecoderLayer, M2M100EncoderLayer

from .configuration_ode_m2m100 import ODEM2M100Config
from .fields import Sublayer, layer_field
from .fixed_grid import FixedGridSolver
from .ode_layers import SharedSublayers, StageCachedDecoderBlock, is_plain, stack_solvers


class ODEM2M100EncoderLayer(SharedSublayers, M2M100EncoderLayer):
    """A Runge–Kutta block over M2M100's (pre-norm) encoder layer."""

    def __init__(self, config: ODEM2M100Config, solver: FixedGridSolver) -> None:
        super().__init__(config)
        self.use_solver(solver)

    def forward(self, hidden_states: Tensor, attention_mask: Tensor, **kwargs: Any) -> Tensor:
        """y(T) of F(z) = a + f(z + a), a(x) = Dropout(SelfAttn(LN₁ x)), from y(0) = ``hidden_states``."""

        def attention(x: Tensor) -> Tensor:
            a, _ = self.self_attn(hidden_states=self.self_attn_layer_norm(x), attention_mask=attention_mask, **kwargs)
            return self.apply_dropout(a)

        sublayers = [Sublayer(attention), self.feed_forward_sublayer()]
        return self.solver.solve(lambda t, z, step, stage: layer_field(self.field_form, z, sublayers), hidden_states)


class ODEM2M100DecoderLayer(StageCachedDecoderBlock, M2M100DecoderLayer):
    """A Runge–Kutta block over M2M100's (pre-norm) decoder layer, one cache per (step, stage);
    its inputs start with the decoder start token and are never padded (causal mask alone)."""

    def __init__(self, config: ODEM2M100Config, layer_idx: int, solver: FixedGridSolver) -> None:
        super().__init__(config, layer_idx)
        self.init_block(layer_idx, solver)


class ODEM2M100ForConditionalGeneration(M2M100ForConditionalGeneration):
    """M2M100ForConditionalGeneration whose layers are Runge–Kutta blocks where the config says so;
    an encoder with the DLCL corrector holds its states as ``corrector_states``."""

    config_class = ODEM2M100Config

    def __init__(self, config: ODEM2M100Config) -> None:
        super().__init__(config)
        if not is_plain(config, "encoder"):
            solvers, states = stack_solvers(config, "encoder", config.encoder_layers)
            self.model.encoder.layers = nn.ModuleList(ODEM2M100EncoderLayer(config, s) for s in solvers)
            if states is not None:
                self.model.encoder.corrector_states = states
        if not is_plain(config, "decoder"):
            solvers, _ = stack_solvers(config, "decoder", config.decoder_layers)  # DLCL: encoders only
            self.model.decoder.layers = nn.ModuleList(
                ODEM2M100DecoderLayer(config, i, s) for i, s in enumerate(solvers)
            )
        self.post_init()
