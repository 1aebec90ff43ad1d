"""DLCL layer-history aggregation (Wang et al., 2019), as in the public ODE Transformer setup.

History states: h_0 = the embedding output, h_l = LN_l(y_l) for the output y_l of block l
(pre-norm; post-norm stores y_l and normalises the aggregate instead). Block l reads

    x_l = Σ_{j ≤ l} W_lj h_j,

and the stack's output is x_L: a :class:`~ode_seq.solvers.dlcl.DLCL` over the stack's blocks
(``dense`` fixes W_lj = 1/(l+1); ``learnable_dense`` trains W, initialised to the same average).
"""

from __future__ import annotations

from typing import Any, Dict, Tuple

from fairseq.modules import LayerNorm
from torch import Tensor, nn

from ode_seq.solvers.dlcl import DLCL, HISTORY_TYPES


def layer_history(kind: str, num_blocks: int, embed_dim: int, normalize_before: bool) -> DLCL:
    """The DLCL of a stack's layer history ``kind`` (one of ``HISTORY_TYPES`` but none)."""
    if kind not in HISTORY_TYPES[1:]:
        raise ValueError(f"unknown layer history {kind!r}; choose one of: {', '.join(HISTORY_TYPES)}")
    return DLCL(num_blocks, embed_dim, kind == "learnable_dense", normalize_before, norm=LayerNorm)


class PassStates:
    """The stack's DLCL and the states h_0 … h_l of the current forward pass, which its blocks hand
    on to each other (fairseq's stack loop gives a block x alone); a plain object, so the DLCL's
    parameters stay registered once, on the stack."""

    def __init__(self, dlcl: DLCL) -> None:
        self.dlcl = dlcl
        self.states: Tuple[Tensor, ...] = ()


class HistoryBlock(nn.Module):
    """A block whose input is the DLCL history mix x_l and whose output joins the history:
    ``first`` starts the pass's states with the embedding, ``last`` returns the final mix x_L
    instead of the block output."""

    def __init__(self, block: nn.Module, history: PassStates, first: bool, last: bool) -> None:
        super().__init__()
        self.block = block
        self.history = history
        self.first = first
        self.last = last

    def forward(self, x: Tensor, *args: Any, **kwargs: Any):
        dlcl, history = self.history.dlcl, self.history
        history.states = (x,) if self.first else dlcl.append(history.states, x)
        out = self.block(dlcl.read(history.states), *args, **kwargs)
        if not self.last:
            return out
        history.states = dlcl.append(history.states, out[0] if isinstance(out, tuple) else out)
        mixed = dlcl.read(history.states)
        return (mixed, *out[1:]) if isinstance(out, tuple) else mixed

    def upgrade_state_dict_named(self, state_dict: Dict[str, Tensor], name: str) -> None:
        """Nothing to upgrade here. fairseq's encoder calls this on each of its layers; the
        wrapped block is upgraded when fairseq's model walks its submodules."""
