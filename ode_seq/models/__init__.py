"""The fairseq models, architectures and criterions of ode-seq (what ``--user-dir user_dir``
registers): ``ode_transformer``, ``ode_transformer_nonauto``, ``stable_ode_transformer``, and
``lora_transformer`` (fairseq's Transformer with LoRA adapters, for step-count adaptation)."""

from . import architectures, criteria  # noqa: F401  (registration)
from .lora import LoRATransformerModel
from .nonautonomous import NonAutonomousODETransformerModel
from .ode_transformer import ODETransformerModel
from .stable_ode_transformer import StableODETransformerModel

__all__ = [
    "LoRATransformerModel",
    "NonAutonomousODETransformerModel",
    "ODETransformerModel",
    "StableODETransformerModel",
]
