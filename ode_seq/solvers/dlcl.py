"""DLCL: dynamic linear combinations of a stack's states (Wang et al., 2019), one module for the
layer history and PCformer's public-code corrector (torch only).

States h_0 … h_l, h_0 the stack's input; state l of block output y_l is h_l = LN_l(y_l) (pre-norm)
or y_l (post-norm). Block l reads

    x_l = Σ_{j ≤ l} W_lj h_j    (post-norm: LN_l of the sum, for l ≥ 1),

W lower-triangular, initialised to the average (row l: 1/(l + 1)), learned or fixed. The module
holds W and the LN_l; the states are an argument and a return value (a tuple), never kept.

- Layer history (``--*-layer-history``): one DLCL over the blocks' outputs (``dense``: W fixed,
  ``learnable_dense``: W trained).
- PCformer's public-code corrector (``--*-ode-corrector dlcl``, :class:`StateHistory`): two DLCLs
  over the same states, (W, LN) mixing the predictions P, h_{n+1} = LN_{n+1}(P), into the
  corrector's input x̃ = Σ_j W_{n+1,j} h_j, and (W', LN') replacing h_{n+1} by LN'_{n+1}(F(x̃))
  and giving y_{n+1} = Σ_j W'_{n+1,j} h_j.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Sequence, Tuple

import torch
from torch import Tensor, nn

HISTORY_TYPES = ("none", "dense", "learnable_dense")

States = Tuple[Tensor, ...]


class DLCL(nn.Module):
    """x_l = Σ_{j ≤ l} W_lj h_j over ``blocks`` + 1 states (see the module docstring); ``norm``
    makes each LN_l from the width (fairseq's LayerNorm for fairseq's stacks)."""

    def __init__(
        self,
        blocks: int,
        embed_dim: int,
        learnable: bool = True,
        normalize_before: bool = True,
        norm: Callable[[int], nn.Module] = nn.LayerNorm,
    ) -> None:
        super().__init__()
        self.normalize_before = normalize_before
        self.layer_norms = nn.ModuleList(norm(embed_dim) for _ in range(blocks))
        average = torch.ones(blocks + 1, blocks + 1).tril()
        average = average / average.sum(dim=1, keepdim=True)
        if learnable:
            self.weight = nn.Parameter(average)
        else:
            self.register_buffer("weight", average, persistent=False)

    def append(self, states: Sequence[Tensor], y: Tensor) -> States:
        """(h_0, …, h_{l−1}, h_l): ``states`` and the state of block output y_l."""
        l = len(states)
        if l > len(self.layer_norms):
            raise RuntimeError(f"a DLCL over {len(self.layer_norms)} blocks has no state {l}")
        return (*states, self.layer_norms[l - 1](y) if self.normalize_before else y)

    def read(self, states: Sequence[Tensor]) -> Tensor:
        """x_l = Σ_{j ≤ l} W_lj h_j for l = len(states) − 1."""
        l = len(states) - 1
        weights = self.weight[l, : l + 1].to(states[0].dtype)
        mixed = sum(w * h for w, h in zip(weights, states))
        if self.normalize_before or l == 0:
            return mixed
        return self.layer_norms[l - 1](mixed)


class StateHistory(nn.Module):
    """PCformer's public-code corrector: DLCL mixes (W, LN) of the predictions and (W', LN') of
    the corrections over one stack's states (see the module docstring; ``steps``: the stack's
    corrector steps): ``prediction`` holds W and the LN, ``corrected`` W' and the LN'."""

    def __init__(self, steps: int, embed_dim: int) -> None:
        super().__init__()
        self.prediction = DLCL(steps, embed_dim)
        self.corrected = DLCL(steps, embed_dim)
        self.register_load_state_dict_pre_hook(rename_old_keys)

    def corrector_input(self, states: States, prediction: Tensor) -> Tensor:
        """x̃ = Σ_j W_{n+1,j} h_j with h_{n+1} = LN_{n+1}(P)."""
        return self.prediction.read(self.prediction.append(states, prediction))

    def correct(self, states: States, correction: Tensor) -> Tuple[Tensor, States]:
        """(y_{n+1}, states with h_{n+1} = LN'_{n+1}(F(x̃))): y_{n+1} = Σ_j W'_{n+1,j} h_j."""
        corrected = self.corrected.append(states, correction)
        return self.corrected.read(corrected), corrected


# A StateHistory's parameters in checkpoints written before its two mixes were DLCL modules.
OLD_STATE_HISTORY_NAMES = {
    "weight": "prediction.weight",
    "prediction_norms.": "prediction.layer_norms.",
    "corrected_weight": "corrected.weight",
    "corrected_norms.": "corrected.layer_norms.",
}


def rename_old_keys(module: nn.Module, state_dict: Dict[str, Any], prefix: str, *args: Any) -> None:
    """Load hook: a StateHistory's old names (W ``weight``, LN ``prediction_norms``, W'
    ``corrected_weight``, LN' ``corrected_norms``) become today's, their values kept."""
    renamed: List[Tuple[str, str]] = []
    for key in state_dict:
        name = key[len(prefix) :] if key.startswith(prefix) else None
        for old, new in OLD_STATE_HISTORY_NAMES.items():
            if name is not None and (name == old or (old.endswith(".") and name.startswith(old))):
                renamed.append((key, prefix + new + name[len(old) :]))
    for old_key, new_key in renamed:
        state_dict[new_key] = state_dict.pop(old_key)
