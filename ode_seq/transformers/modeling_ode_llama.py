"""Llama with ODE blocks: each decoder layer integrates the field F of its pre-norm layer,
residual-branch form F(z) = a(z) + m(z + a(z)) with a = SelfAttn(RMSNorm₁ ·) and
m = MLP(RMSNorm₂ ·) (:func:`ode_seq.fields.layer_field`), over [0, 1] in N steps of the
configured tableau (solvers of :class:`ode_seq.solvers.StackSolvers`), the layer's parameters
reused at every stage. Euler with one step is transformers' Llama layer. Embeddings, rotary
positions, final norm and output projection are Llama's own, so a Llama's weights load unchanged
(upcycling). Full forward passes only: no key/value cache yet.
"""

from dataclasses import replace
from typing import Any, Optional

from torch import Tensor, nn
from transformers import LlamaForCausalLM, LlamaModel
from transformers import initialization as init
from transformers.models.llama.modeling_llama import LlamaDecoderLayer

from ode_seq.fields import Sublayer, layer_field
from ode_seq.solvers.coefficients import StageGate
from ode_seq.solvers.fixed_grid import FixedGridSolver
from ode_seq.solvers.stack_solvers import StackSolvers
from ode_seq.solvers.tableaus import get_tableau

from .checkpointing import StageCheckpointing
from .configuration_ode_llama import ODELlamaConfig
from .remote_code import RemoteCodeSaving

SUPPORTED_COEFFICIENTS = ("fixed", "learned")
NO_CACHE_YET = (
    "ODELlamaForCausalLM keeps no key/value cache yet (step-by-step decoding, generate()): "
    "call it with use_cache=False and no cache, for full forward passes"
)


def decoder_solvers(config: ODELlamaConfig) -> list:
    """The solvers of the decoder's blocks in order, each with its own stage weights."""
    if config.ode_coefficients not in SUPPORTED_COEFFICIENTS:
        raise ValueError(
            f"ode_coefficients {config.ode_coefficients!r} is not supported by ODELlamaConfig yet; "
            f"choose one of: {', '.join(SUPPORTED_COEFFICIENTS)}"
        )
    solvers = StackSolvers(
        get_tableau(config.decoder_ode_method),
        config.num_hidden_layers,
        config.hidden_size,
        steps=config.decoder_ode_steps,
        coefficients=config.ode_coefficients,
        share_gate=False,
    )
    return [solvers.next() for _ in range(config.num_hidden_layers)]


class ODELlamaDecoderLayer(LlamaDecoderLayer):
    """A block integrating the field of Llama's decoder layer with ``solver``; its stage weights
    are registered as ``combiner``."""

    def __init__(self, config: ODELlamaConfig, layer_idx: int, solver: FixedGridSolver) -> None:
        super().__init__(config, layer_idx)
        self.solver = solver
        self.combiner = solver.combine

    def attention_branch(self, x: Tensor, **attention: Any) -> Tensor:
        """a(x) = SelfAttn(RMSNorm₁ x)."""
        return self.self_attn(hidden_states=self.input_layernorm(x), **attention)[0]

    def mlp_branch(self, x: Tensor) -> Tensor:
        """m(x) = MLP(RMSNorm₂ x)."""
        return self.mlp(self.post_attention_layernorm(x))

    def forward(
        self,
        hidden_states: Tensor,
        attention_mask: Optional[Tensor] = None,
        position_ids: Optional[Tensor] = None,
        cache: Any = None,
        use_cache: Optional[bool] = False,
        position_embeddings: Optional[tuple] = None,
        **kwargs: Any,
    ) -> Tensor:
        if cache is not None or use_cache:
            raise NotImplementedError(NO_CACHE_YET)
        attention = dict(
            attention_mask=attention_mask, position_ids=position_ids, position_embeddings=position_embeddings, **kwargs
        )
        sublayers = [Sublayer(lambda x: self.attention_branch(x, **attention)), Sublayer(self.mlp_branch)]
        # The stage weights registered now: peft's modules_to_save, for one, puts a trainable copy in their place.
        solver = replace(self.solver, combine=self.combiner)
        return solver.solve(lambda t, z, step, stage: layer_field("residual-branch", z, sublayers), hidden_states)


class ODELlamaModel(StageCheckpointing, RemoteCodeSaving, LlamaModel):
    """LlamaModel whose decoder layers are ODE blocks (checkpointed per stage; saved with its code)."""

    config_class = ODELlamaConfig

    def __init__(self, config: ODELlamaConfig) -> None:
        super().__init__(config)
        self.layers = nn.ModuleList(
            ODELlamaDecoderLayer(config, i, solver) for i, solver in enumerate(decoder_solvers(config))
        )
        self.post_init()

    def _init_weights(self, module: nn.Module) -> None:
        """transformers' initialisation, but a stage gate's projection as ode-seq's (Xavier, β = 0),
        also when upcycling, where transformers initialises the weights a checkpoint lacks. (The
        gate's Linear is recognised here: transformers skips modules without parameters of their
        own, such as the gate, in a model defined outside it.)"""
        super()._init_weights(module)
        gates = [getattr(layer, "combiner", None) for layer in self.layers]
        if any(isinstance(gate, StageGate) and module is gate.proj for gate in gates):
            init.xavier_uniform_(module.weight)
            init.zeros_(module.bias)


class ODELlamaForCausalLM(StageCheckpointing, RemoteCodeSaving, LlamaForCausalLM):
    """LlamaForCausalLM over an :class:`ODELlamaModel` (Llama's parameter names, plus each block's
    ``combiner`` weights when learned; checkpointed per stage; saved with its code)."""

    config_class = ODELlamaConfig

    def __init__(self, config: ODELlamaConfig) -> None:
        super().__init__(config)
        self.model = ODELlamaModel(config)
        self.post_init()
