"""ODE language models in Hugging Face transformers (torch and transformers only, no fairseq).

For each family of :data:`.families.FAMILIES` (Llama, Qwen2, Mistral, GPT-2): ``ODE<Family>Config``
(model_type ``ode_<family>``), ``ODE<Family>Model`` and ``ODE<Family>ForCausalLM``, registered with
``AutoConfig``, ``AutoModel`` and ``AutoModelForCausalLM`` on import. Each decoder layer is an ODE
block (:mod:`.blocks`) with the decoder ODE settings of :mod:`.settings` and one key/value cache per
evaluation (:mod:`.stage_caches`), so ``generate()`` decodes step by step exactly.
"""

from transformers import AutoConfig, AutoModel, AutoModelForCausalLM

from .families import (
    FAMILIES,
    ODEGPT2Config,
    ODEGPT2ForCausalLM,
    ODEGPT2Model,
    ODELlamaConfig,
    ODELlamaForCausalLM,
    ODELlamaModel,
    ODEMistralConfig,
    ODEMistralForCausalLM,
    ODEMistralModel,
    ODEQwen2Config,
    ODEQwen2ForCausalLM,
    ODEQwen2Model,
)

for _config, _model, _causal_lm in (
    (ODELlamaConfig, ODELlamaModel, ODELlamaForCausalLM),
    (ODEQwen2Config, ODEQwen2Model, ODEQwen2ForCausalLM),
    (ODEMistralConfig, ODEMistralModel, ODEMistralForCausalLM),
    (ODEGPT2Config, ODEGPT2Model, ODEGPT2ForCausalLM),
):
    AutoConfig.register(_config.model_type, _config, exist_ok=True)
    AutoModel.register(_config, _model, exist_ok=True)
    AutoModelForCausalLM.register(_config, _causal_lm, exist_ok=True)

__all__ = [
    "FAMILIES",
    "ODEGPT2Config",
    "ODEGPT2ForCausalLM",
    "ODEGPT2Model",
    "ODELlamaConfig",
    "ODELlamaForCausalLM",
    "ODELlamaModel",
    "ODEMistralConfig",
    "ODEMistralForCausalLM",
    "ODEMistralModel",
    "ODEQwen2Config",
    "ODEQwen2ForCausalLM",
    "ODEQwen2Model",
]
