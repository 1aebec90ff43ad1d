"""fairseq model ``ode_transformer_nonauto``: Neural ODE Transformer with weights θ(τ) (Tong et al.).

Each stack is one block integrating over its whole depth (``--encoder-layers`` L gives the
interval [0, L], i.e. τ ∈ [0, 1]); ``--encoder-ode-steps`` N sets the grid (default L) and can
be changed after training with ``--model-overrides`` (step-count adaptation).
"""
from __future__ import annotations

import dataclasses

from fairseq.models import register_model

from ode_seq.nonautonomous import NonAutonomousDecoderBlock, NonAutonomousEncoderBlock, TimeConfig
from ode_seq.time_dependent import TIME_FORMS

from .ode_transformer import ODETransformerDecoder, ODETransformerEncoder, ODETransformerModel


def add_time_args(parser) -> None:
    parser.add_argument("--time-embed-dim", type=int, metavar="D", help="d_e, size of e(τ) (default: 20)")
    parser.add_argument("--time-features", type=int, metavar="S", help="sinusoid pairs in φ(τ) (default: 128)")
    parser.add_argument("--time-hidden-dim", type=int, metavar="H", help="width of the time MLP (default: 128)")
    parser.add_argument(
        "--time-weights", choices=TIME_FORMS,
        help="θ(τ) form: paper (c + A e(τ)) or low-rank (W0 + U diag(B e(τ)) Vᵀ) (default: paper)",
    )
    parser.add_argument("--time-rank", type=int, metavar="R", help="rank r of the low-rank form (default: 8)")


def time_config(cfg) -> TimeConfig:
    d = TimeConfig()
    values = {f.name: getattr(cfg, key, None) for f, key in zip(
        dataclasses.fields(TimeConfig),
        ("time_embed_dim", "time_features", "time_hidden_dim", "time_weights", "time_rank"),
    )}
    config = dataclasses.replace(d, **{k: v for k, v in values.items() if v is not None})
    if min(config.embed_dim, config.features, config.hidden, config.rank) < 1:
        raise ValueError(
            "--time-embed-dim, --time-features, --time-hidden-dim and --time-rank must be positive"
        )
    if config.form not in TIME_FORMS:
        raise ValueError(f"--time-weights {config.form!r} is not valid; choose one of: {', '.join(TIME_FORMS)}")
    return config


class _OneBlockStack:
    """A stack whose depth is one non-autonomous block over [0, L]."""

    def _init_ode(self, cfg, side: str):
        setattr(cfg, f"{side}_share_group_size", getattr(cfg, side).layers)
        grouped = super()._init_ode(cfg, side)
        if self.ode.is_adaptive:
            raise ValueError(
                f"--{side}-ode-method {self.ode.method}: non-autonomous stacks use fixed grids "
                "(weights are evaluated at each step's time); choose e.g. euler or rk4"
            )
        self.time = time_config(cfg)
        return grouped


class NonAutonomousEncoder(_OneBlockStack, ODETransformerEncoder):
    def block_class(self, *args, **kwargs):
        return NonAutonomousEncoderBlock(*args, time=self.time, **kwargs)


class NonAutonomousDecoder(_OneBlockStack, ODETransformerDecoder):
    def block_class(self, *args, **kwargs):
        return NonAutonomousDecoderBlock(*args, time=self.time, **kwargs)


@register_model("ode_transformer_nonauto")
class NonAutonomousODETransformerModel(ODETransformerModel):
    """Encoder and decoder as non-autonomous ODEs with weights θ(τ)."""

    encoder_class = NonAutonomousEncoder
    decoder_class = NonAutonomousDecoder

    @staticmethod
    def add_args(parser) -> None:
        ODETransformerModel.add_args(parser)
        add_time_args(parser)
