"""fairseq model ``lora_transformer``: fairseq's Transformer fine-tuned through LoRA adapters.

Step-count adaptation (Tong et al., 2025): a non-autonomous model materialised at N' steps is a
plain N'-layer Transformer (``python -m ode_seq.cli.export``), which is then fine-tuned fully
(fairseq's ``transformer`` with ``--finetune-from-model``) or with LoRA (Hu et al., 2021), this
model: every adapted linear map x ↦ W x + b becomes

    x ↦ W x + b + (α/r) · B A x,    A ∈ R^{r×in} (random), B ∈ R^{out×r} (zero at the start),

and only A and B train; embeddings, norms and the output projection stay frozen. The adapters
are peft's (``peft.inject_adapter_in_model``), on the modules named by ``--lora-targets``
(default: every attention projection and both FFN matrices of every layer).

fairseq's attention takes a fused path (``F.multi_head_attention_forward`` with the projections'
weight tensors) when it has no cache, which would bypass the adapters; it is switched off for
the attention modules holding adapters. A plain Transformer state dict (``--finetune-from-model``
of an exported model) loads into this model: its weights become the adapted layers' base weights
and the adapters keep their initial values (B = 0), so fine-tuning starts from the plain model.
``python -m ode_seq.cli.export`` merges the adapters back (W ← W + (α/r)·B A) into a plain
``transformer`` checkpoint, which decodes as fast as the model it came from.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Dict, Optional, Tuple

from fairseq.models import register_model, register_model_architecture
from fairseq.models.transformer import TransformerModel, base_architecture
from fairseq.modules.multihead_attention import MultiheadAttention
from torch import Tensor, nn

from ode_seq.options import add_arguments, option, option_defaults, read_options

BASE_LAYER = "base_layer"
ADAPTER_MARK = ".lora_"


@dataclass(frozen=True)
class LoRAOptions:
    """Rank, scale, dropout and target modules of the adapters."""

    prefix: ClassVar[str] = "lora_"
    rank: int = option(8, "LoRA rank r", metavar="R")
    alpha: float = option(16.0, "LoRA scale alpha (the update is alpha/r * B A)", metavar="A")
    dropout: float = option(0.0, "dropout on the adapters' input")
    targets: str = option(
        "q_proj,k_proj,v_proj,out_proj,fc1,fc2",
        "comma-separated names of the layer modules that get adapters",
        metavar="NAMES",
    )

    @property
    def target_modules(self) -> Tuple[str, ...]:
        return tuple(name for name in self.targets.split(",") if name)

    def validate(self) -> None:
        if self.rank < 1:
            raise ValueError(f"--lora-rank must be a positive integer, got {self.rank}")
        if not 0 <= self.dropout < 1:
            raise ValueError(f"--lora-dropout must be in [0, 1), got {self.dropout}")
        if not self.target_modules:
            raise ValueError("--lora-targets names no module; e.g. q_proj,k_proj,v_proj,out_proj,fc1,fc2")


def add_adapters(layers: nn.Module, options: LoRAOptions) -> None:
    """Put LoRA adapters on ``options.target_modules`` inside ``layers`` (in place, peft's
    layers) and make them the only trainable parameters there."""
    from peft import LoraConfig, inject_adapter_in_model

    config = LoraConfig(
        r=options.rank,
        lora_alpha=options.alpha,
        lora_dropout=options.dropout,
        target_modules=list(options.target_modules),
        bias="none",
    )
    inject_adapter_in_model(config, layers)
    for module in layers.modules():
        if isinstance(module, MultiheadAttention) and _has_adapter(module):
            module.skip_embed_dim_check = True  # the fused path would read W without its adapter


def _has_adapter(module: nn.Module) -> bool:
    return any(ADAPTER_MARK in f".{name}" for name, _ in module.named_parameters())


def merge_adapters(model: nn.Module) -> nn.Module:
    """W ← W + (α/r)·B A for every adapted layer (peft's merge), each replaced by its base layer."""
    from peft.tuners.tuners_utils import BaseTunerLayer

    adapted = [(name, m) for name, m in model.named_modules() if isinstance(m, BaseTunerLayer)]
    for name, module in adapted:
        module.merge()
        parent_name, _, attribute = name.rpartition(".")
        setattr(model.get_submodule(parent_name), attribute, module.get_base_layer())
    for module in model.modules():
        if isinstance(module, MultiheadAttention):
            module.skip_embed_dim_check = False
    return model


@register_model("lora_transformer")
class LoRATransformerModel(TransformerModel):
    """fairseq's Transformer whose encoder and decoder layers carry LoRA adapters."""

    @classmethod
    def add_args(cls, parser) -> None:
        TransformerModel.add_args(parser)
        add_arguments(parser, LoRAOptions)

    @classmethod
    def build_model(cls, args, task):
        options = read_options(args, LoRAOptions)
        options.validate()
        model = super().build_model(args, task)
        for stack in (model.encoder, model.decoder):
            add_adapters(stack.layers, options)
        for name, p in model.named_parameters():
            p.requires_grad_(ADAPTER_MARK in name)
        return model

    def load_state_dict(
        self,
        state_dict: Dict[str, Tensor],
        strict: bool = True,
        model_cfg: Optional[Any] = None,
        args: Optional[Any] = None,
    ):
        """Also a plain Transformer's state dict: its weights load as the adapted layers' base
        weights, the adapters keep their current values."""
        own = self.state_dict()
        if not any(ADAPTER_MARK in name for name in state_dict):
            state_dict = {_adapted_name(name, own): value for name, value in state_dict.items()}
            state_dict.update({name: value for name, value in own.items() if ADAPTER_MARK in name})
        return super().load_state_dict(state_dict, strict=strict, model_cfg=model_cfg, args=args)


def _adapted_name(name: str, own: Dict[str, Tensor]) -> str:
    """``…q_proj.weight`` → ``…q_proj.base_layer.weight`` where the model adapted q_proj."""
    module, _, leaf = name.rpartition(".")
    adapted = f"{module}.{BASE_LAYER}.{leaf}"
    return adapted if adapted in own else name


def _lora_architecture(args) -> None:
    for key, value in option_defaults(LoRAOptions).items():
        if getattr(args, key, None) is None:
            setattr(args, key, value)
    base_architecture(args)


register_model_architecture("lora_transformer", "lora_transformer")(_lora_architecture)
