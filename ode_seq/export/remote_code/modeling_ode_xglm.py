"""XGLM with Runge–Kutta blocks: ode-seq's ODE language model (``ode_transformer_lm``), run by
ode-seq's solver core and layer field (``fixed_grid.py``, ``tableaus.py``, ``coefficients.py``,
``fields.py``, copied from ode-seq); shipped in an exported folder and loaded with
``trust_remote_code=True``.

Each layer of XGLM is a block integrating the field F of its pre-norm layer (``ode_field``:
residual-branch F(z) = a + f(z + a), parallel-branch a(z) + f(z), whole-layer the layer itself,
a = SelfAttn(LN₁ ·), f = FFN(LN₂ ·)) over [0, T] in N steps of the configured tableau, with one
self-attention cache per (step, stage) (``ode_layers.StageCachedDecoderBlock``); with
``decoder_ode_corrector multistep`` PCformer's predictor–corrector steps (``predictor_corrector.py``,
see ``ode_layers.py``). Embeddings, positions, final LayerNorm and output projection are XGLM's own.
"""

from typing import Optional

from torch import Tensor, nn
from transformers import XGLMForCausalLM
from transformers.models.xglm.modeling_xglm import XGLMDecoderLayer

from .configuration_ode_xglm import ODEXGLMConfig
from .fixed_grid import FixedGridSolver
from .ode_layers import StageCachedDecoderBlock, stack_solvers


class ODEXGLMDecoderLayer(StageCachedDecoderBlock, XGLMDecoderLayer):
    """A Runge–Kutta block over XGLM's (pre-norm) decoder layer, one cache per (step, stage);
    self-attention takes XGLM's causal mask with the prompts' left padding."""

    def __init__(self, config: ODEXGLMConfig, layer_idx: int, solver: FixedGridSolver) -> None:
        super().__init__(config, layer_idx)
        self.init_block(layer_idx, solver, config.ode_field)

    def self_attention_mask(self, attention_mask: Optional[Tensor]) -> Optional[Tensor]:
        return attention_mask


class ODEXGLMForCausalLM(XGLMForCausalLM):
    """XGLMForCausalLM whose layers are Runge–Kutta blocks."""

    config_class = ODEXGLMConfig

    def __init__(self, config: ODEXGLMConfig) -> None:
        super().__init__(config)
        solvers, _ = stack_solvers(config, "decoder", config.num_layers)
        self.model.layers = nn.ModuleList(ODEXGLMDecoderLayer(config, i, s) for i, s in enumerate(solvers))
        self.post_init()
