"""The fairseq models, architectures and criterions of ode-seq (what ``--user-dir user_dir``
registers): ``ode_transformer``, ``ode_transformer_nonauto``, ``stable_ode_transformer``,
``lora_transformer`` (fairseq's Transformer with LoRA adapters, for step-count adaptation), and
the language models ``ode_transformer_lm``, ``ode_transformer_lm_nonauto`` and
``stable_ode_transformer_lm`` (fairseq's ``language_modeling`` task)."""

from . import architectures, criteria, lm_architectures  # noqa: F401  (registration)
from .language_model import (
    NonAutonomousODETransformerLanguageModel,
    ODETransformerLanguageModel,
    StableODETransformerLanguageModel,
)
from .lora import LoRATransformerModel
from .nonautonomous import NonAutonomousODETransformerModel
from .ode_transformer import ODETransformerModel
from .stable_ode_transformer import StableODETransformerModel

__all__ = [
    "NonAutonomousODETransformerLanguageModel",
    "ODETransformerLanguageModel",
    "StableODETransformerLanguageModel",
    "LoRATransformerModel",
    "NonAutonomousODETransformerModel",
    "ODETransformerModel",
    "StableODETransformerModel",
]
