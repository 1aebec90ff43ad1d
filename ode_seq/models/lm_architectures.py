"""Named architectures of the ODE language model: a size preset of fairseq's ``transformer_lm``
family plus an ODE setting each (the layer kind among its options), one table
(:data:`LM_ARCHITECTURES`) registered in one loop.

The sizes are fairseq's: ``lm`` is ``--arch transformer_lm`` (its dataclass defaults),
``gpt2_tiny`` and ``gpt2_small`` are ``transformer_lm_gpt2_tiny`` / ``_gpt2_small``, ``wiki103``
is ``transformer_lm_wiki103`` (adaptive input and softmax, no final LayerNorm). Every ODE LM is
pre-norm (fairseq's ``base_lm_architecture`` sets ``--decoder-normalize-before``, which the
residual-branch field needs), so ``ode_transformer_lm_euler`` is ``transformer_lm
--decoder-normalize-before`` (fairseq's plain ``transformer_lm`` is post-norm). Values are
defaults: the command line wins.
"""

from __future__ import annotations

from typing import Any, Dict, Tuple

from fairseq.models.transformer_lm import base_lm_architecture

from .architectures import WHOLE_STACK, named, register_architectures
from .language_model import ODETransformerLanguageModel  # noqa: F401  (registers the model)


def decoder_size(
    embed_dim: int, ffn_embed_dim: int, attention_heads: int, layers: int, **options: Any
) -> Dict[str, Any]:
    """The options of a language model's decoder of these sizes, and ``options``."""
    return dict(
        decoder_embed_dim=embed_dim,
        decoder_ffn_embed_dim=ffn_embed_dim,
        decoder_attention_heads=attention_heads,
        decoder_layers=layers,
        **options,
    )


GPT2 = dict(dropout=0.1, attention_dropout=0.1, activation_fn="gelu")
# transformer_lm_wiki103's adaptive input and softmax (bands of 20000 and 40000 more words).
ADAPTIVE = dict(
    adaptive_input=True,
    tie_adaptive_weights=True,
    adaptive_input_cutoff="20000,60000",
    adaptive_softmax_cutoff="20000,60000",
    adaptive_softmax_dropout=0.2,
    no_decoder_final_norm=True,
    tie_adaptive_proj=True,
)
LM_SIZES: Dict[str, Dict[str, Any]] = {
    "lm": decoder_size(
        512, 2048, 8, 6, dropout=0.1, attention_dropout=0.0, activation_dropout=0.0, activation_fn="relu"
    ),
    "gpt2_tiny": decoder_size(64, 64, 1, 2, **GPT2),
    "gpt2_small": decoder_size(1024, 4096, 16, 24, **GPT2),
    "wiki103": decoder_size(1024, 4096, 8, 16, dropout=0.3, attention_dropout=0.1, activation_dropout=0.1, **ADAPTIVE),
}

# ODE settings: option values.
LM_SETTINGS: Dict[str, Dict[str, Any]] = {
    "euler": {},
    "rk2": dict(decoder_ode_method="heun"),
    "rk2_learned": dict(decoder_ode_method="heun", ode_coefficients="learned"),
    "rk4": dict(decoder_ode_method="rk4"),
    "parallel": dict(ode_field="parallel-branch"),
    "nonauto": dict(layer_kind="time-dependent"),
    # PCformer (Li et al., 2024): RK4 predictor with EMA weights, multistep corrector (M = 3).
    "pcformer": dict(decoder_ode_method="rk4", ode_coefficients="ema", decoder_ode_corrector="multistep"),
    # One shared stable layer over the whole depth [0, L], parallel field (as stable_ode_transformer).
    "stable": dict(layer_kind="stable", ode_field="parallel-branch", decoder_share_group_size=WHOLE_STACK),
}
ODE_SETTINGS = ("euler", "rk2", "rk2_learned", "rk4", "parallel", "nonauto", "pcformer")

# Architecture name: (setting, size).
LM_ARCHITECTURES: Dict[str, Tuple[str, str]] = {
    "ode_transformer_lm": ("euler", "lm"),
    **named("ode_transformer_lm_{}", "lm", *ODE_SETTINGS),
    **named("ode_transformer_lm_{}_gpt2_tiny", "gpt2_tiny", *ODE_SETTINGS),
    **named("ode_transformer_lm_{}_gpt2_small", "gpt2_small", *ODE_SETTINGS),
    **named("ode_transformer_lm_{}_wiki103", "wiki103", "euler", "rk2_learned", "pcformer"),
    "stable_ode_transformer_lm": ("stable", "lm"),
    **{f"stable_ode_transformer_lm_{size}": ("stable", size) for size in ("gpt2_tiny", "gpt2_small")},
}

register_architectures("ode_transformer_lm", LM_ARCHITECTURES, LM_SIZES, LM_SETTINGS, base_lm_architecture)
