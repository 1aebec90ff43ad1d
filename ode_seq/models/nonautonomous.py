"""fairseq model ``ode_transformer_nonauto``: Neural ODE Transformer with weights θ(τ) (Tong et al.).

Each stack is one block of the time-dependent layer kind (:mod:`ode_seq.layers.time_dependent`)
integrating over its whole depth (``--encoder-layers`` L gives the interval [0, L], i.e.
τ ∈ [0, 1]); ``--encoder-ode-steps`` N sets the grid (default L) and can be changed after
training with ``--model-overrides`` (step-count adaptation).
"""

from __future__ import annotations

from typing import ClassVar

from fairseq.models import register_model

from .ode_transformer import ODETransformerModel


@register_model("ode_transformer_nonauto")
class NonAutonomousODETransformerModel(ODETransformerModel):
    """Encoder and decoder as non-autonomous ODEs with weights θ(τ)."""

    layer_kind: ClassVar[str] = "time-dependent"
