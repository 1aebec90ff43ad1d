"""DLCL layer-history aggregation (Wang et al., 2019), as in the public ODE Transformer setup.

History states: h_0 = the embedding output, h_l = LN_l(y_l) for the output y_l of block l
(pre-norm; post-norm stores y_l and normalises the aggregate instead). Block l reads

    x_l = Σ_{j ≤ l} W_lj h_j,

and the stack's output is x_L. ``dense`` fixes W_lj = 1/(l+1); ``learnable_dense`` trains W,
initialised to the same lower-triangular average.
"""

from __future__ import annotations

from typing import Any, Dict, List

import torch
from fairseq.modules import LayerNorm
from torch import Tensor, nn

HISTORY_TYPES = ("none", "dense", "learnable_dense")


class LayerHistory(nn.Module):
    """Holds h_0 … h_l for one forward pass; blocks ``push`` outputs and ``read`` inputs."""

    def __init__(self, kind: str, num_blocks: int, embed_dim: int, normalize_before: bool) -> None:
        super().__init__()
        if kind not in HISTORY_TYPES[1:]:
            raise ValueError(f"unknown layer history {kind!r}; choose one of: {', '.join(HISTORY_TYPES)}")
        self.normalize_before = normalize_before
        self.layer_norms = nn.ModuleList(LayerNorm(embed_dim) for _ in range(num_blocks))
        average = torch.ones(num_blocks + 1, num_blocks + 1).tril()
        average = average / average.sum(dim=1, keepdim=True)
        if kind == "learnable_dense":
            self.weight = nn.Parameter(average)
        else:
            self.register_buffer("weight", average, persistent=False)
        self._states: List[Tensor] = []

    def start(self, embedding: Tensor) -> None:
        """Begin a pass with h_0 = the embedding output."""
        self._states = [embedding]

    def push(self, block_output: Tensor) -> None:
        """Store h_l for the output of block l (l ≥ 1 counts the embedding as 0)."""
        l = len(self._states)
        self._states.append(self.layer_norms[l - 1](block_output) if self.normalize_before else block_output)

    def read(self) -> Tensor:
        """x_l = Σ_{j ≤ l} W_lj h_j for the newest l."""
        l = len(self._states) - 1
        weights = self.weight[l, : l + 1].to(self._states[0].dtype)
        mixed = sum(w * h for w, h in zip(weights, self._states))
        if self.normalize_before or l == 0:
            return mixed
        return self.layer_norms[l - 1](mixed)


class HistoryBlock(nn.Module):
    """A block whose input is the DLCL history mix x_l and whose output joins the history.

    The history module belongs to the stack (registered there once); ``first`` starts it with
    the embedding, ``last`` returns the final mix x_L instead of the block output.
    """

    def __init__(self, block: nn.Module, history: LayerHistory, first: bool, last: bool) -> None:
        super().__init__()
        self.block = block
        self.__dict__["history"] = history
        self.first = first
        self.last = last

    def forward(self, x: Tensor, *args: Any, **kwargs: Any):
        history: LayerHistory = self.__dict__["history"]
        if self.first:
            history.start(x)
        else:
            history.push(x)
        out = self.block(history.read(), *args, **kwargs)
        if not self.last:
            return out
        if not isinstance(out, tuple):
            history.push(out)
            return history.read()
        history.push(out[0])
        return (history.read(),) + out[1:]

    def upgrade_state_dict_named(self, state_dict: Dict[str, Tensor], name: str) -> None:
        """Nothing to upgrade here. fairseq's encoder calls this on each of its layers; the
        wrapped block is upgraded when fairseq's model walks its submodules."""
