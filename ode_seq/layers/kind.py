"""A layer kind: how one kind of Runge–Kutta block differs from the standard one.

A kind is a mixin over the block classes of :mod:`.blocks`. It overrides fairseq's own layer
hooks (``build_self_attention``, ``build_fc1``, …), which build the modules F is made of, and the
hooks below, and is registered once with :func:`.blocks.register_layer_kind`, which makes its
encoder and decoder block classes. The standard kind is :class:`LayerKind` itself. A kind whose
field is not made of the standard sublayers (:mod:`.sublayers`) overrides the block's
``sublayers``.
"""

from __future__ import annotations

from typing import Any, ClassVar, Dict, Optional, Tuple

from torch import Tensor

from ode_seq.solvers import ButcherTableau


class LayerKind:
    """The hooks a layer kind may override (all do nothing here)."""

    options_class: ClassVar[Optional[type]] = None
    """The dataclass of the kind's own options (its fields' metadata carries their help)."""

    one_block_per_stack: ClassVar[bool] = False
    """Whether a stack is one block over its whole depth [0, L]."""

    time_dependent_weights: ClassVar[bool] = False
    """Whether :meth:`field_weights` gives weights θ(t) (F's sublayers are then made at every stage
    evaluation; otherwise once per solve)."""

    share_cross_attention: ClassVar[bool] = True
    """Whether every decoder stage reuses stage (0, 0)'s cross-attention keys/values (true when
    the weights do not depend on the stage)."""

    @classmethod
    def check_method(cls, side: str, method: str, adaptive: bool) -> None:
        """Refuse a method the kind cannot integrate (ValueError naming the option)."""

    @classmethod
    def check_corrector(cls, side: str, corrector: str) -> None:
        """Refuse a predictor-corrector form the kind cannot integrate (ValueError naming the option)."""

    @classmethod
    def solver_nodes(cls, tableau: ButcherTableau) -> Optional[Tuple[float, ...]]:
        """The times c_i at which stages evaluate the field, if not the tableau's."""
        return None

    def check_layer_options(self, cfg: Any) -> None:
        """Refuse fairseq layer options the kind does not support; runs once fairseq has built
        the layer and the block knows its spec, before :meth:`finish_layer`."""

    def finish_layer(self, cfg: Any) -> None:
        """Change the layer fairseq has built (norms, initialisation, parameters)."""

    def field_weights(self, t: float) -> Optional[Dict[str, Tensor]]:
        """The weights θ(t) of F at solver time t by parameter name (they replace the layer's
        parameters for that evaluation), or None: the layer's own parameters."""
        return None
