"""fairseq model ``stable_ode_transformer``: ODE Transformer blocks with the stable ODE-ViT field.

Every block is a Runge–Kutta block (any fixed-grid method, steps, weight sharing) whose field
uses CenterNorm, bias-free spectral-norm-1 projections and, optionally, L2-distance attention
and a spectral-norm constraint (:mod:`ode_seq.stable`). The architectures share one layer per
stack (``--*-share-group-size`` = number of layers, integrated over [0, L]) in the parallel form
F(x) = SelfAttn(CN₁ x) + FFN(CN₂ x) (decoder: + CrossAttn(CN x)).

``--init-from-teacher PATH`` copies embeddings, positions, final norms and output projection from
a pre-norm fairseq transformer when the model is built for training; the model's args then
record that it was done, so loading the student's checkpoints never needs the teacher.
"""
from __future__ import annotations

from typing import Any, Dict, List

from fairseq.models import register_model, register_model_architecture
from torch import nn

from ode_seq.distillation import copy_interface, interface_parameters, load_teacher
from ode_seq.stable import ATTENTION_KERNELS, StableDecoderODEBlock, StableEncoderODEBlock

from .architectures import SIZES, make_architecture
from .ode_transformer import ODETransformerDecoder, ODETransformerEncoder, ODETransformerModel


class StableODETransformerEncoder(ODETransformerEncoder):
    block_class = StableEncoderODEBlock


class StableODETransformerDecoder(ODETransformerDecoder):
    block_class = StableDecoderODEBlock


@register_model("stable_ode_transformer")
class StableODETransformerModel(ODETransformerModel):
    """ODE Transformer with stable blocks; records the update count for criterion curricula."""

    encoder_class = StableODETransformerEncoder
    decoder_class = StableODETransformerDecoder

    def __init__(self, args, encoder, decoder) -> None:
        super().__init__(args, encoder, decoder)
        self.num_updates = 0

    @staticmethod
    def add_args(parser) -> None:
        ODETransformerModel.add_args(parser)
        parser.add_argument(
            "--attention-kernel", choices=ATTENTION_KERNELS,
            help="attention logits: dot = q.k/sqrt(d), l2 = -|q - k|^2/sqrt(d) (Lipschitz) "
            "(default: the architecture's)",
        )
        parser.add_argument(
            "--spectral-norm-constraint", action="store_true",
            help="keep every projection of the field at spectral norm 1 during training "
            "(power-iteration reparametrisation); without it only the initialisation has norm 1",
        )
        parser.add_argument(
            "--init-from-teacher", metavar="PATH",
            help="copy embeddings, positions, final norms and output projection from this "
            "pre-norm fairseq transformer checkpoint when training starts",
        )

    @classmethod
    def build_model(cls, args, task):
        model = super().build_model(args, task)
        if getattr(args, "init_from_teacher", None) and not getattr(args, "initialised_from_teacher", False):
            copy_interface(model, load_teacher(args.init_from_teacher, task))
            args.initialised_from_teacher = True
        return model

    def set_num_updates(self, num_updates: int) -> None:
        super().set_num_updates(num_updates)
        self.num_updates = num_updates

    def interface_parameters(self) -> List[nn.Parameter]:
        """Embeddings, positions, final norms and output projection (what a teacher provides)."""
        return interface_parameters(self)


STABLE_DEFAULTS: Dict[str, Any] = dict(
    ode_field="parallel-branch", attention_kernel="dot", spectral_norm_constraint=False
)

STABLE_ARCHITECTURES: Dict[str, tuple] = {
    "stable_ode_transformer": ("base", dict()),
    "stable_ode_transformer_l2": ("base", dict(attention_kernel="l2")),
    "stable_ode_transformer_small": ("small", dict()),
    "stable_ode_transformer_l2_small": ("small", dict(attention_kernel="l2")),
}


def _make_stable_architecture(size: str, options: Dict[str, Any]):
    preset = make_architecture(size, dict(STABLE_DEFAULTS, **options))

    def architecture(args) -> None:
        for side in ("encoder", "decoder"):
            if getattr(args, f"{side}_share_group_size", None) is None:
                layers = getattr(args, f"{side}_layers", None) or SIZES[size][f"{side}_layers"]
                setattr(args, f"{side}_share_group_size", layers)
        preset(args)

    return architecture


for _name, (_size, _options) in STABLE_ARCHITECTURES.items():
    register_model_architecture("stable_ode_transformer", _name)(
        _make_stable_architecture(_size, _options)
    )
