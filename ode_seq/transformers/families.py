"""The ODE models of each transformers family, made from one table (torch and transformers only).

A row names the family's config, base model, causal-LM and decoder-layer classes and its two
branch accessors, a(x) = Attn(Norm₁ x) and m(x) = MLP(Norm₂ x), in the family's own module names:

- Llama, Qwen2, Mistral: ``self_attn`` after ``input_layernorm`` (RMSNorm, rotary positions,
  grouped-query attention; Qwen2's q/k/v biases, Mistral's sliding window are their attention's
  own), ``mlp`` (gated) after ``post_attention_layernorm``;
- GPT-2: ``attn`` after ``ln_1`` (LayerNorm, Conv1D projections, learned positions added to the
  embeddings), ``mlp`` after ``ln_2``.

From a row come three classes, ``ODE<Family>Config`` (model_type ``ode_<family>``: the family's
config plus :mod:`.settings`), ``ODE<Family>Model`` and ``ODE<Family>ForCausalLM``: the family's
classes with each decoder layer an ODE block (:mod:`.blocks`). Parameter names are the family's,
plus a block's solver weights (``combiner``, ``corrector``; ``shared_combiner`` on the base model
for ``learned-shared``), so the family's checkpoints load into them unchanged (upcycling).
"""

import inspect
from dataclasses import dataclass
from typing import Any, Dict, Tuple

from torch import Tensor, nn
from transformers import (
    GPT2Config,
    GPT2LMHeadModel,
    GPT2Model,
    LlamaConfig,
    LlamaForCausalLM,
    LlamaModel,
    MistralConfig,
    MistralForCausalLM,
    MistralModel,
    Qwen2Config,
    Qwen2ForCausalLM,
    Qwen2Model,
)
from transformers.models.gpt2.modeling_gpt2 import GPT2Block
from transformers.models.llama.modeling_llama import LlamaDecoderLayer
from transformers.models.mistral.modeling_mistral import MistralDecoderLayer
from transformers.models.qwen2.modeling_qwen2 import Qwen2DecoderLayer

from .blocks import Branch, ODEDecoderBlock, decoder_solvers, init_ode_weights, stage_gates
from .checkpointing import StageCheckpointing
from .remote_code import RemoteCodeSaving
from .settings import ode_config_class


def llama_attention(layer: nn.Module, x: Tensor, **attention: Any) -> Tensor:
    """a(x) = SelfAttn(RMSNorm₁ x) of a Llama-family layer."""
    return layer.self_attn(hidden_states=layer.input_layernorm(x), **attention)[0]


def llama_mlp(layer: nn.Module, x: Tensor) -> Tensor:
    """m(x) = MLP(RMSNorm₂ x) of a Llama-family layer."""
    return layer.mlp(layer.post_attention_layernorm(x))


def gpt2_attention(layer: nn.Module, x: Tensor, **attention: Any) -> Tensor:
    """a(x) = Dropout(Attn(LN₁ x)) of a GPT-2 block."""
    return layer.attn(layer.ln_1(x), **attention)[0]


def gpt2_mlp(layer: nn.Module, x: Tensor) -> Tensor:
    """m(x) = Dropout(MLP(LN₂ x)) of a GPT-2 block."""
    return layer.mlp(layer.ln_2(x))


@dataclass(frozen=True)
class Family:
    """A transformers decoder-only family: its classes, the attribute of its base model holding
    the layers, and its branch accessors."""

    name: str
    config: type
    model: type
    causal_lm: type
    layer: type
    layers: str
    attention: Branch
    mlp: Branch


FAMILIES: Dict[str, Family] = {
    family.name: family
    for family in (
        Family(
            "Llama", LlamaConfig, LlamaModel, LlamaForCausalLM, LlamaDecoderLayer, "layers", llama_attention, llama_mlp
        ),
        Family(
            "Qwen2", Qwen2Config, Qwen2Model, Qwen2ForCausalLM, Qwen2DecoderLayer, "layers", llama_attention, llama_mlp
        ),
        Family(
            "Mistral",
            MistralConfig,
            MistralModel,
            MistralForCausalLM,
            MistralDecoderLayer,
            "layers",
            llama_attention,
            llama_mlp,
        ),
        Family("GPT2", GPT2Config, GPT2Model, GPT2LMHeadModel, GPT2Block, "h", gpt2_attention, gpt2_mlp),
    )
}


class ODEWeights:
    """Mixin of an ODE family's pre-trained models: transformers' initialisation, and ode-seq's for
    the weights of the blocks' solvers (:func:`.blocks.init_ode_weights`)."""

    def _init_weights(self, module: nn.Module) -> None:
        super()._init_weights(module)
        gates = stage_gates(self) if isinstance(module, nn.Linear) else []  # a gate's projection is a Linear
        init_ode_weights(module, gates)


# What both pre-trained classes of every family add to the family's own, first in their bases.
PRETRAINED_MIXINS: Tuple[type, ...] = (StageCheckpointing, RemoteCodeSaving, ODEWeights)


def new_class(name: str, bases: Tuple[type, ...], doc: str, **attributes: Any) -> type:
    """A class ``name`` of this module (what pickling, ``auto_map`` and reprs look it up by)."""
    return type(name, bases, dict(__module__=__name__, __qualname__=name, __doc__=doc, **attributes))


def ode_classes(family: Family) -> Tuple[type, type, type]:
    """(ODE<Family>Config, ODE<Family>Model, ODE<Family>ForCausalLM) of ``family``."""
    prefix = f"ODE{family.name}"
    config_class = ode_config_class(family.config, f"ode_{family.name.lower()}", f"{prefix}Config", __name__)
    block_class = new_class(
        f"{prefix}DecoderLayer",
        (ODEDecoderBlock, family.layer),
        f"An ODE block over {family.layer.__name__}.",
        attention_branch=family.attention,
        mlp_branch=family.mlp,
        layer_signature=inspect.signature(family.layer.forward),
    )
    common = dict(config_class=config_class, _no_split_modules=[block_class.__name__])

    def init_model(self: nn.Module, config: Any) -> None:
        family.model.__init__(self, config)
        solvers, shared_gate = decoder_solvers(config)
        blocks = (block_class(config, i, solver, shared_gate is not None) for i, solver in enumerate(solvers))
        setattr(self, family.layers, nn.ModuleList(blocks))
        if shared_gate is not None:
            self.shared_combiner = shared_gate
        self.post_init()

    def init_causal_lm(self: nn.Module, config: Any) -> None:
        family.causal_lm.__init__(self, config)
        setattr(self, self.base_model_prefix, model_class(config))
        self.post_init()

    doc = f"{family.model.__name__} whose decoder layers are ODE blocks."
    model_class = new_class(f"{prefix}Model", (*PRETRAINED_MIXINS, family.model), doc, __init__=init_model, **common)
    doc = f"{family.causal_lm.__name__} over an {prefix}Model."
    lm_class = new_class(
        f"{prefix}ForCausalLM", (*PRETRAINED_MIXINS, family.causal_lm), doc, __init__=init_causal_lm, **common
    )
    return config_class, model_class, lm_class


ODELlamaConfig, ODELlamaModel, ODELlamaForCausalLM = ode_classes(FAMILIES["Llama"])
ODEQwen2Config, ODEQwen2Model, ODEQwen2ForCausalLM = ode_classes(FAMILIES["Qwen2"])
ODEMistralConfig, ODEMistralModel, ODEMistralForCausalLM = ode_classes(FAMILIES["Mistral"])
ODEGPT2Config, ODEGPT2Model, ODEGPT2ForCausalLM = ode_classes(FAMILIES["GPT2"])
