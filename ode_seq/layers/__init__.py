"""Vector fields on fairseq's Transformer layers and the Runge–Kutta blocks that integrate them.

- :mod:`ode_seq.fields` (beside this package, torch only): F of a layer as a function of its
  sublayers (three field forms), which these blocks build from fairseq's sublayers;
- :mod:`.sublayers`: the sublayers of fairseq's encoder and decoder layers, with weights θ if given;
- :mod:`.blocks`: encoder and decoder blocks (``Block(cfg, BlockSpec)``), the layer-kind registry;
- :mod:`.kind`: what a layer kind may change; kinds :mod:`.time_dependent` (weights θ(τ), with
  :mod:`.time_weights`) and :mod:`.stable` (CenterNorm, spectral norms, L2 attention);
- :mod:`.stage_caches`: per-(step, stage) key/value caches for incremental decoding;
- :mod:`.relative_attention`, :mod:`.attention_heads`: attention variants;
- :mod:`.layer_history`: DLCL aggregation of block outputs;
- :mod:`.recording`: step states and attention of a stack, as observers of its solves.

Importing the package registers every layer kind in ``LAYER_KINDS``.
"""

from . import stable, time_dependent  # noqa: F401  (registers the layer kinds)
from .blocks import LAYER_KINDS, BlockSpec, DecoderBlock, EncoderBlock, ODEBlock, ode_blocks, register_layer_kind
from .kind import LayerKind

__all__ = [
    "LAYER_KINDS",
    "BlockSpec",
    "DecoderBlock",
    "EncoderBlock",
    "LayerKind",
    "ODEBlock",
    "ode_blocks",
    "register_layer_kind",
]
