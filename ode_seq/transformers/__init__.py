"""ODE language models in Hugging Face transformers (torch and transformers only, no fairseq):
:class:`ODELlamaConfig`, :class:`ODELlamaModel` and :class:`ODELlamaForCausalLM`, registered with
``AutoConfig``, ``AutoModel`` and ``AutoModelForCausalLM`` on import."""

from transformers import AutoConfig, AutoModel, AutoModelForCausalLM

from .configuration_ode_llama import ODELlamaConfig
from .modeling_ode_llama import ODELlamaDecoderLayer, ODELlamaForCausalLM, ODELlamaModel

AutoConfig.register(ODELlamaConfig.model_type, ODELlamaConfig, exist_ok=True)
AutoModel.register(ODELlamaConfig, ODELlamaModel, exist_ok=True)
AutoModelForCausalLM.register(ODELlamaConfig, ODELlamaForCausalLM, exist_ok=True)

__all__ = ["ODELlamaConfig", "ODELlamaDecoderLayer", "ODELlamaForCausalLM", "ODELlamaModel"]
