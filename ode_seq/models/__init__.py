"""The fairseq models, architectures and criterions of ode-seq (what ``--user-dir user_dir``
registers): ``ode_transformer`` (translation), ``ode_transformer_lm`` (fairseq's
``language_modeling`` task), each with the layer kind as an option (``--layer-kind``), and
``lora_transformer`` (fairseq's Transformer with LoRA adapters, for step-count adaptation).
"""

from . import architectures, criteria, lm_architectures  # noqa: F401  (registration)
from .language_model import ODETransformerLanguageModel
from .lora import LoRATransformerModel
from .ode_transformer import ODETransformerModel

__all__ = [
    "ODETransformerLanguageModel",
    "LoRATransformerModel",
    "ODETransformerModel",
]
