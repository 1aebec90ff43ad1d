"""Architectures that between them cover every model family and ODE feature of ode-seq: the
reliability tests train each one, and ``benchmarks/gpu.sh`` trains each in fp16 and bf16.

    for name, (arch, options) in FEATURES.items():
        argv = ["--arch", arch, *command_line(options)]
"""

from __future__ import annotations

from typing import Any, Dict, List, Tuple

from ode_seq.models import architectures  # noqa: F401  (registers ode-seq's architectures)

# One architecture per model family and per ODE feature, with the options that select it.
# The adaptive solver runs without dropout: masks redrawn at every evaluation make the field
# random, and dopri5's error control then takes ~480 field evaluations per encoder pass
# instead of ~26.
FEATURES: Dict[str, Tuple[str, Dict[str, Any]]] = {
    "rk4 encoder-decoder, learned gates": ("ode_transformer_rk4_encdec_small", {"ode_coefficients": "learned"}),
    "rk4, one gate shared per stack": ("ode_transformer_rk4_encdec_small", {"ode_coefficients": "learned-shared"}),
    "rk2 learned gate, relative positions": ("ode_transformer_rk2_learned_rpr_wmt_en_de_big_e12", {}),
    "dopri5, parallel field, shared weights": (
        "ode_transformer_parallel_shared_dopri5",
        {"encoder_share_group_size": 2, "dropout": 0.0, "attention_dropout": 0.0, "activation_dropout": 0.0},
    ),
    "non-autonomous weights": ("ode_transformer_nonauto_small", {}),
    "stable field, L2 attention": ("stable_ode_transformer_l2_small", {}),
}


def command_line(options: Dict[str, Any]) -> List[str]:
    """``options`` (model option values) as fairseq-train arguments."""
    return [arg for key, value in options.items() for arg in (f"--{key.replace('_', '-')}", str(value))]
