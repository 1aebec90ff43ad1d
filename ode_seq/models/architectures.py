"""Named architectures of the ODE translation model: a size preset plus an ODE setting each, one
table (:data:`ARCHITECTURES`) registered in one loop.

A setting is option values, the layer kind among them (``layer_kind``); values are defaults:
anything given on the command line wins (fairseq leaves unset model options out of ``args``, and
the architecture fills only what is missing). fairseq runs the architecture again on a loaded
checkpoint's options, so a checkpoint saved before ``--layer-kind`` existed (as
``ode_transformer_nonauto_small`` or ``stable_ode_transformer``) takes its kind from its name.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Dict, Mapping, Optional, Tuple

from fairseq.models import ARCH_CONFIG_REGISTRY, MODEL_REGISTRY, register_model_architecture
from fairseq.models.transformer import base_architecture

from ode_seq.options import option_defaults

from .ode_transformer import ODETransformerModel  # noqa: F401  (registers the model)

WHOLE_STACK = "the stack's layers"
"""A ``--*-share-group-size`` default: one layer shared over the whole stack (its layer count,
given or the size's), integrated over [0, L]."""


@dataclass(frozen=True, eq=False)
class Architecture:
    """A fairseq architecture function: ``defaults`` fill every option the command line left
    unset (a share group of :data:`WHOLE_STACK` becomes the stack's layer count), then fairseq's
    ``base`` architecture function fills the rest."""

    defaults: Dict[str, Any]
    base: Callable[[Any], None]

    def __call__(self, args: Any) -> None:
        whole_stack = [key for key, value in self.defaults.items() if value == WHOLE_STACK]
        for key, value in self.defaults.items():
            if key not in whole_stack and getattr(args, key, None) is None:
                setattr(args, key, value)
        for key in whole_stack:
            if getattr(args, key, None) is None:
                setattr(args, key, getattr(args, key.replace("share_group_size", "layers")))
        self.base(args)


def register_architectures(
    model_name: str,
    table: Mapping[str, Tuple[str, str]],
    sizes: Mapping[str, Dict[str, Any]],
    settings: Mapping[str, Dict[str, Any]],
    base: Callable[[Any], None],
) -> None:
    """Register every architecture name → (setting, size) of ``table`` for model ``model_name``:
    the model's option defaults under the size's values under the setting's."""
    defaults: Dict[str, Any] = {}
    for options_class, side in MODEL_REGISTRY[model_name].option_classes():
        defaults.update(option_defaults(options_class, side))
    for name, (setting, size) in table.items():
        architecture = Architecture({**defaults, **sizes[size], **settings[setting]}, base)
        register_model_architecture(model_name, name)(architecture)


def named(pattern: str, size: str, *settings: str) -> Dict[str, Tuple[str, str]]:
    """Architecture name ``pattern.format(setting)`` → (setting, ``size``) for each of ``settings``."""
    return {pattern.format(setting): (setting, size) for setting in settings}


def architecture_layer_kind(model_cfg: Any) -> Optional[str]:
    """The layer kind of the model that fairseq's model options ``model_cfg`` (a checkpoint's
    ``cfg.model``) configure: its ``--layer-kind``, else its architecture's (a checkpoint saved
    before the option existed); None when the architecture is not one of these tables'."""
    arch = getattr(model_cfg, "arch", None) or getattr(model_cfg, "_name", None)
    architecture = ARCH_CONFIG_REGISTRY.get(arch)
    if not isinstance(architecture, Architecture):
        return None
    return getattr(model_cfg, "layer_kind", None) or architecture.defaults["layer_kind"]


def encoder_decoder_size(
    embed_dim: int, ffn_embed_dim: int, attention_heads: int, encoder_layers: int, decoder_layers: int, dropout: float
) -> Dict[str, Any]:
    """The options of a pre-norm encoder-decoder of these sizes (both stacks of one width)."""
    values: Dict[str, Any] = {}
    for side, layers in (("encoder", encoder_layers), ("decoder", decoder_layers)):
        values.update(
            {
                f"{side}_embed_dim": embed_dim,
                f"{side}_ffn_embed_dim": ffn_embed_dim,
                f"{side}_attention_heads": attention_heads,
                f"{side}_layers": layers,
                f"{side}_normalize_before": True,
            }
        )
    return dict(values, dropout=dropout, attention_dropout=0.1, activation_dropout=0.1)


SIZES: Dict[str, Dict[str, Any]] = {
    # transformer-base (Vaswani et al.), pre-norm.
    "base": encoder_decoder_size(512, 2048, 8, 6, 6, dropout=0.1),
    # a CPU-sized model for demos and tests.
    "small": encoder_decoder_size(256, 1024, 4, 3, 3, dropout=0.1),
    # the paper's big models: d=1024, FFN 4096, 16 heads, dropout 0.3.
    "big": encoder_decoder_size(1024, 4096, 16, 6, 6, dropout=0.3),
    "big_e12": encoder_decoder_size(1024, 4096, 16, 12, 6, dropout=0.3),
}

RK2_LEARNED = dict(encoder_ode_method="heun", ode_coefficients="learned")
RPR_8 = dict(encoder_relative_positions=8, decoder_relative_positions=8)
# PCformer (Li et al., 2024) as its Figure 1 draws it: an RK4 predictor with EMA weights and the
# 4-step multistep corrector (M = 3) in the encoder; the decoder stays Euler, as in ODE
# Transformer's WMT systems and PCformer's public code. The WMT sizes are those of the ODE
# Transformer system the paper compares with (big 12-6, relative positions ±8).
PCFORMER = dict(encoder_ode_method="rk4", ode_coefficients="ema", encoder_ode_corrector="multistep")
PARALLEL = dict(ode_field="parallel-branch")
# Tong et al. (2025): weights θ(τ), Euler on [0, 1] with L steps. "parity": the low-rank form
# sized to transformer-base's parameter count; "parallel": the paper's field (attention and FFN
# on the same input) with its code's one time network per weight.
NONAUTO = dict(layer_kind="time-dependent")
# ODE-ViT's stable field: one shared layer per stack in the parallel form, dot or L2 attention.
STABLE = dict(PARALLEL, layer_kind="stable", encoder_share_group_size=WHOLE_STACK, decoder_share_group_size=WHOLE_STACK)

SETTINGS: Dict[str, Dict[str, Any]] = {
    "euler": {},
    "rk2": dict(encoder_ode_method="heun"),
    "rk3": dict(encoder_ode_method="rk3"),
    "rk4": dict(encoder_ode_method="rk4"),
    "rk2_learned": RK2_LEARNED,
    "rk4_encdec": dict(encoder_ode_method="rk4", decoder_ode_method="rk4"),
    # Zhong et al. (2022): parallel attention∥FFN layers (Euler), and weight-shared encoders
    # integrated by RK4 (6 steps over [0, 6]) or adaptively by dopri5.
    "parallel": PARALLEL,
    "parallel_shared_rk4": dict(PARALLEL, encoder_ode_method="rk4", encoder_share_group_size=6),
    "parallel_shared_dopri5": dict(PARALLEL, encoder_ode_method="dopri5", encoder_share_group_size=6),
    "euler_rpr": RPR_8,
    "rk2_learned_rpr": dict(RK2_LEARNED, **RPR_8),
    "pcformer": PCFORMER,
    "pcformer_rpr": dict(PCFORMER, **RPR_8),
    # The public code's corrector: F at a DLCL mix of normalised states, output another mix.
    "pcformer_dlcl_rpr": dict(PCFORMER, encoder_ode_corrector="dlcl", **RPR_8),
    "nonauto": NONAUTO,
    "nonauto_parity": dict(NONAUTO, time_weights="low-rank", time_embed_dim=16, time_rank=1600),
    "nonauto_parallel": dict(NONAUTO, ode_field="parallel-branch", time_network="per-weight"),
    "stable": STABLE,
    "stable_l2": dict(STABLE, attention_kernel="l2"),
}

# Architecture name: (setting, size).
ARCHITECTURES: Dict[str, Tuple[str, str]] = {
    "ode_transformer": ("euler", "base"),
    **named("ode_transformer_{}", "base", "euler", "rk2", "rk3", "rk4", "rk2_learned", "rk4_encdec"),
    **named("ode_transformer_{}_small", "small", "euler", "rk2_learned", "rk4", "rk4_encdec"),
    **named("ode_transformer_{}", "base", "parallel", "parallel_shared_rk4", "parallel_shared_dopri5"),
    **named("ode_transformer_{}_wmt_en_de_big", "big", "euler", "rk2_learned"),
    **named("ode_transformer_{}_wmt_en_de_big_e12", "big_e12", "euler_rpr", "rk2_learned_rpr"),
    "pcformer_small": ("pcformer", "small"),
    "pcformer_wmt_en_de_big": ("pcformer_rpr", "big_e12"),
    "pcformer_wmt_en_fr_big": ("pcformer_rpr", "big_e12"),
    "pcformer_dlcl_wmt_en_de_big": ("pcformer_dlcl_rpr", "big_e12"),
    **named("ode_transformer_{}", "base", "nonauto", "nonauto_parity", "nonauto_parallel"),
    **named("ode_transformer_{}_small", "small", "nonauto", "nonauto_parallel"),
    **{f"stable_ode_transformer{s}": (f"stable{s}", "base") for s in ("", "_l2")},
    **{f"stable_ode_transformer{s}_small": (f"stable{s}", "small") for s in ("", "_l2")},
}

register_architectures("ode_transformer", ARCHITECTURES, SIZES, SETTINGS, base_architecture)
