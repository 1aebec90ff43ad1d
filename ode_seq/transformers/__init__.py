"""ODE language models in Hugging Face transformers (torch and transformers only, no fairseq):
:class:`ODELlamaConfig` and :class:`ODELlamaForCausalLM`, registered with ``AutoConfig`` and
``AutoModelForCausalLM`` on import."""

from transformers import AutoConfig, AutoModelForCausalLM

from .configuration_ode_llama import ODELlamaConfig
from .modeling_ode_llama import ODELlamaDecoderLayer, ODELlamaForCausalLM

AutoConfig.register(ODELlamaConfig.model_type, ODELlamaConfig, exist_ok=True)
AutoModelForCausalLM.register(ODELlamaConfig, ODELlamaForCausalLM, exist_ok=True)

__all__ = ["ODELlamaConfig", "ODELlamaDecoderLayer", "ODELlamaForCausalLM"]
