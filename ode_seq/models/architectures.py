"""Named architectures of the ODE models: a size preset plus an ODE setting each.

Values here are defaults: anything given on the command line wins (fairseq leaves unset
model options out of ``args``, and these functions only fill what is missing).
"""

from __future__ import annotations

from typing import Any, Callable, Dict

from fairseq.models import register_model_architecture
from fairseq.models.transformer import base_architecture

from ode_seq.options import option_defaults

from .nonautonomous import NonAutonomousODETransformerModel
from .ode_transformer import ODETransformerModel
from .stable_ode_transformer import StableODETransformerModel

SIZES: Dict[str, Dict[str, Any]] = {
    # transformer-base (Vaswani et al.), pre-norm.
    "base": dict(embed_dim=512, ffn_embed_dim=2048, attention_heads=8, encoder_layers=6, decoder_layers=6, dropout=0.1),
    # a CPU-sized model for demos and tests.
    "small": dict(
        embed_dim=256, ffn_embed_dim=1024, attention_heads=4, encoder_layers=3, decoder_layers=3, dropout=0.1
    ),
    # the paper's big models: d=1024, FFN 4096, 16 heads, dropout 0.3.
    "big": dict(
        embed_dim=1024, ffn_embed_dim=4096, attention_heads=16, encoder_layers=6, decoder_layers=6, dropout=0.3
    ),
    "big_e12": dict(
        embed_dim=1024, ffn_embed_dim=4096, attention_heads=16, encoder_layers=12, decoder_layers=6, dropout=0.3
    ),
}

RPR_8 = dict(encoder_relative_positions=8, decoder_relative_positions=8)
# PCformer (Li et al., 2024) as its Figure 1 draws it: an RK4 predictor with EMA weights and the
# 4-step multistep corrector (M = 3) in the encoder; the decoder stays Euler, as in ODE
# Transformer's WMT systems and PCformer's public code. The WMT sizes are those of the ODE
# Transformer system the paper compares with (big 12-6, relative positions ±8).
PCFORMER = dict(encoder_ode_method="rk4", ode_coefficients="ema", encoder_ode_corrector="multistep")

ARCHITECTURES: Dict[str, tuple] = {
    "ode_transformer_euler": ("base", dict()),
    "ode_transformer_rk2": ("base", dict(encoder_ode_method="heun")),
    "ode_transformer_rk3": ("base", dict(encoder_ode_method="rk3")),
    "ode_transformer_rk4": ("base", dict(encoder_ode_method="rk4")),
    "ode_transformer_rk2_learned": ("base", dict(encoder_ode_method="heun", ode_coefficients="learned")),
    "ode_transformer_rk4_encdec": ("base", dict(encoder_ode_method="rk4", decoder_ode_method="rk4")),
    "ode_transformer_euler_small": ("small", dict()),
    "ode_transformer_rk2_learned_small": ("small", dict(encoder_ode_method="heun", ode_coefficients="learned")),
    "ode_transformer_rk4_small": ("small", dict(encoder_ode_method="rk4")),
    "ode_transformer_rk4_encdec_small": ("small", dict(encoder_ode_method="rk4", decoder_ode_method="rk4")),
    # Zhong et al. (2022): parallel attention∥FFN layers (Euler), and weight-shared encoders
    # integrated by RK4 (6 steps over [0, 6]) or adaptively by dopri5.
    "ode_transformer_parallel": ("base", dict(ode_field="parallel-branch")),
    "ode_transformer_parallel_shared_rk4": (
        "base",
        dict(ode_field="parallel-branch", encoder_ode_method="rk4", encoder_share_group_size=6),
    ),
    "ode_transformer_parallel_shared_dopri5": (
        "base",
        dict(ode_field="parallel-branch", encoder_ode_method="dopri5", encoder_share_group_size=6),
    ),
    "ode_transformer_euler_wmt_en_de_big": ("big", dict()),
    "ode_transformer_rk2_learned_wmt_en_de_big": ("big", dict(encoder_ode_method="heun", ode_coefficients="learned")),
    "ode_transformer_euler_rpr_wmt_en_de_big_e12": ("big_e12", dict(RPR_8)),
    "ode_transformer_rk2_learned_rpr_wmt_en_de_big_e12": (
        "big_e12",
        dict(encoder_ode_method="heun", ode_coefficients="learned", **RPR_8),
    ),
    "pcformer_small": ("small", PCFORMER),
    "pcformer_wmt_en_de_big": ("big_e12", dict(PCFORMER, **RPR_8)),
    "pcformer_wmt_en_fr_big": ("big_e12", dict(PCFORMER, **RPR_8)),
    # The public code's corrector: F at a DLCL mix of normalised states, output another mix.
    "pcformer_dlcl_wmt_en_de_big": ("big_e12", dict(PCFORMER, encoder_ode_corrector="dlcl", **RPR_8)),
}


def _preset_values(size: str) -> Dict[str, Any]:
    s = SIZES[size]
    values: Dict[str, Any] = {}
    for side in ("encoder", "decoder"):
        values.update(
            {
                f"{side}_embed_dim": s["embed_dim"],
                f"{side}_ffn_embed_dim": s["ffn_embed_dim"],
                f"{side}_attention_heads": s["attention_heads"],
                f"{side}_layers": s[f"{side}_layers"],
                f"{side}_normalize_before": True,
            }
        )
    values.update(dropout=s["dropout"], attention_dropout=0.1, activation_dropout=0.1)
    return values


def fill_defaults(model: type, values: Dict[str, Any], base: Callable[[Any], None]) -> Callable[[Any], None]:
    """A fairseq architecture function for ``model``: ``values`` over the defaults of the model's
    ODE options, filling only what the command line left unset, then fairseq's ``base``
    architecture function for the rest."""
    defaults: Dict[str, Any] = {}
    for options_class, side in model.option_classes():
        defaults.update(option_defaults(options_class, side))
    defaults.update(values)

    def architecture(args) -> None:
        for key, value in defaults.items():
            if getattr(args, key, None) is None:
                setattr(args, key, value)
        base(args)

    return architecture


def make_architecture(model: type, size: str, options: Dict[str, Any]) -> Callable[[Any], None]:
    """The architecture of size preset ``size`` with ODE settings ``options``."""
    return fill_defaults(model, {**_preset_values(size), **options}, base_architecture)


def one_shared_layer(architecture: Callable[[Any], None], layers: Dict[str, int]) -> Callable[[Any], None]:
    """``architecture`` with each stack's share group defaulting to all its layers (``layers``:
    the preset's layers of each stack)."""

    def shared(args) -> None:
        for side, preset in layers.items():
            if getattr(args, f"{side}_share_group_size", None) is None:
                setattr(args, f"{side}_share_group_size", getattr(args, f"{side}_layers", None) or preset)
        architecture(args)

    return shared


register_model_architecture("ode_transformer", "ode_transformer")(
    make_architecture(ODETransformerModel, "base", dict())
)
for _name, (_size, _options) in ARCHITECTURES.items():
    register_model_architecture("ode_transformer", _name)(make_architecture(ODETransformerModel, _size, _options))

# Tong et al. (2025): weights θ(τ), Euler on [0, 1] with L steps. "paper": d_e = 20;
# "parity": the low-rank form sized to transformer-base's parameter count; "parallel": the
# paper's field (attention and FFN on the same input) with its code's one time network per weight.
PAPER_FIELD = dict(ode_field="parallel-branch", time_network="per-weight")
NONAUTONOMOUS_ARCHITECTURES: Dict[str, tuple] = {
    "ode_transformer_nonauto": ("base", dict()),
    "ode_transformer_nonauto_parity": ("base", dict(time_weights="low-rank", time_embed_dim=16, time_rank=1600)),
    "ode_transformer_nonauto_parallel": ("base", dict(PAPER_FIELD)),
    "ode_transformer_nonauto_small": ("small", dict()),
    "ode_transformer_nonauto_parallel_small": ("small", dict(PAPER_FIELD)),
}
for _name, (_size, _options) in NONAUTONOMOUS_ARCHITECTURES.items():
    register_model_architecture("ode_transformer_nonauto", _name)(
        make_architecture(NonAutonomousODETransformerModel, _size, _options)
    )

# One shared stable layer per stack in the parallel form, dot or L2 attention.
PARALLEL = dict(ode_field="parallel-branch")
STABLE_ARCHITECTURES: Dict[str, tuple] = {
    "stable_ode_transformer": ("base", dict(PARALLEL)),
    "stable_ode_transformer_l2": ("base", dict(PARALLEL, attention_kernel="l2")),
    "stable_ode_transformer_small": ("small", dict(PARALLEL)),
    "stable_ode_transformer_l2_small": ("small", dict(PARALLEL, attention_kernel="l2")),
}
for _name, (_size, _options) in STABLE_ARCHITECTURES.items():
    register_model_architecture("stable_ode_transformer", _name)(
        one_shared_layer(
            make_architecture(StableODETransformerModel, _size, _options),
            {side: SIZES[_size][f"{side}_layers"] for side in ("encoder", "decoder")},
        )
    )
