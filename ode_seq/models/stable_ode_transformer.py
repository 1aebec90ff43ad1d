"""fairseq model ``stable_ode_transformer``: ODE Transformer blocks with the stable ODE-ViT field.

Every block is a Runge–Kutta block (any fixed-grid method, steps, weight sharing) of the stable
layer kind: CenterNorm, bias-free spectral-norm-1 projections and, optionally, L2-distance
attention and a spectral-norm constraint (:mod:`ode_seq.layers.stable`). The architectures share
one layer per stack (``--*-share-group-size`` = number of layers, integrated over [0, L]) in the
parallel form F(x) = SelfAttn(CN₁ x) + FFN(CN₂ x) (decoder: + CrossAttn(CN x)).

``--init-from-teacher PATH`` copies embeddings, positions, final norms and output projection from
a pre-norm fairseq transformer when the model is built for training; the model's args then
record that it was done, so loading the student's checkpoints never needs the teacher.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, List, Optional, Tuple

from fairseq.models import register_model

from ode_seq.options import option

from .ode_transformer import ODETransformerModel
from .teacher import copy_interface, load_teacher


@dataclass(frozen=True)
class TeacherInitialisation:
    """Where the student's interface comes from."""

    prefix: ClassVar[str] = ""
    init_from_teacher: Optional[str] = option(
        None,
        "copy embeddings, positions, final norms and output projection from this "
        "pre-norm fairseq transformer checkpoint when training starts",
        metavar="PATH",
    )


@register_model("stable_ode_transformer")
class StableODETransformerModel(ODETransformerModel):
    """ODE Transformer with stable blocks."""

    layer_kind: ClassVar[str] = "stable"

    @classmethod
    def option_classes(cls) -> List[Tuple[type, Optional[str]]]:
        return super().option_classes() + [(TeacherInitialisation, None)]

    @classmethod
    def build_model(cls, args, task):
        model = super().build_model(args, task)
        if getattr(args, "init_from_teacher", None) and not getattr(args, "initialised_from_teacher", False):
            copy_interface(model, load_teacher(args.init_from_teacher, task))
            args.initialised_from_teacher = True
        return model
