"""One key/value cache per evaluation of a block's field, inside transformers' Cache API (torch
and transformers only).

Evaluation e = n·E + i (stage i of step n, E evaluations per step: the tableau's stages, plus
the corrector's with PCformer's steps) of a decoder block at position t attends to the keys and
values that evaluation computed at positions ≤ t, so decoding step by step equals the full pass.
The caches of all evaluations live in the block's layer of transformers' cache (a
:class:`~transformers.DynamicCache`'s ``DynamicLayer``, or ``DynamicSlidingWindowLayer`` for a
sliding window), side by side along the head axis: heads e·H … (e+1)·H − 1 are evaluation e's.
Whatever transformers does to a cache (beam reordering, batch selection, cropping, the sliding
window) it does to every evaluation at once, and its sequence length and attention masks are the
family's own.

During a block's forward every evaluation's attention reads and extends its own view
(:class:`EvaluationCache`: a copy of the block's layer holding only its heads, extended as that
layer would be); after the solve :meth:`StageCaches.commit` appends the new keys and values of all
evaluations to the block's layer, once. When decoding (no gradients) with a past in a plain
``DynamicLayer``, the block's grown layer is allocated once per forward instead, the past copied
into it once, and each evaluation writes its new keys and values into its heads of it and attends
to that view, so the past is copied once per block, as a family's layer copies it once
(``torch.cat`` in ``DynamicLayer.update``), not once per evaluation and again at the commit.
"""

import copy
from typing import Any, Dict, Optional, Tuple, Union

import torch
from torch import Tensor
from transformers.cache_utils import Cache, DynamicLayer, DynamicSlidingWindowLayer

KeysValues = Tuple[Tensor, Tensor]
SUPPORTED_LAYERS = (DynamicLayer, DynamicSlidingWindowLayer)


class EvaluationCache:
    """The cache one evaluation's attention calls ``update`` on: its past keys and values (a view
    of the block's layer, ``layer``, restricted to its heads) before the new ones, which it
    records in ``new[slot]``."""

    def __init__(self, layer: DynamicLayer, slot: int, new: Dict[int, KeysValues]) -> None:
        self.layer, self.slot, self.new = layer, slot, new

    def update(self, keys: Tensor, values: Tensor, layer_idx: int, *args: Any, **kwargs: Any) -> KeysValues:
        self.new[self.slot] = (keys, values)
        return self.layer.update(keys, values)


class GrownEvaluationCache:
    """The cache of evaluation ``slot`` when its keys and values go straight into the block's grown
    layer (:meth:`StageCaches.grow`)."""

    def __init__(self, caches: "StageCaches", slot: int) -> None:
        self.caches, self.slot = caches, slot

    def update(self, keys: Tensor, values: Tensor, layer_idx: int, *args: Any, **kwargs: Any) -> KeysValues:
        return self.caches.grow(self.slot, keys, values)


class StageCaches:
    """The ``slots`` evaluation caches of block ``layer_idx`` in ``cache`` during one forward."""

    def __init__(self, cache: Cache, layer_idx: int, slots: int) -> None:
        self.cache, self.layer_idx, self.slots = cache, layer_idx, slots
        self.layer: Optional[DynamicLayer] = cache.layers[layer_idx] if layer_idx < len(cache.layers) else None
        if self.layer is not None and type(self.layer) not in SUPPORTED_LAYERS:
            raise ValueError(
                f"an ODE decoder keeps one key/value cache per evaluation in a dynamic cache; layer "
                f"{layer_idx} of this {type(cache).__name__} is a {type(self.layer).__name__}: decode with "
                "transformers' default DynamicCache (no cache_implementation, or 'dynamic')"
            )
        self.new: Dict[int, KeysValues] = {}
        self.grows_in_place = (
            type(self.layer) is DynamicLayer
            and self.layer.get_seq_length() > 0
            and not torch.is_grad_enabled()
            and not getattr(cache, "offloading", False)
        )
        self.grown: Optional[KeysValues] = None

    def evaluation(self, slot: int) -> Union[EvaluationCache, GrownEvaluationCache]:
        """The cache of evaluation ``slot``: the block's layer (its class, its sliding window) with
        this evaluation's heads of the past keys and values."""
        if self.grows_in_place:
            return GrownEvaluationCache(self, slot)
        if self.layer is None or self.layer.get_seq_length() == 0:
            view = copy.copy(self.layer) if self.layer is not None else DynamicLayer()
            view.keys = view.values = None
            view.is_initialized = False
        else:
            view = copy.copy(self.layer)
            heads = self.layer.keys.size(1) // self.slots
            view.keys = self.layer.keys[:, slot * heads : (slot + 1) * heads]
            view.values = self.layer.values[:, slot * heads : (slot + 1) * heads]
        return EvaluationCache(view, slot, self.new)

    def grow(self, slot: int, keys: Tensor, values: Tensor) -> KeysValues:
        """Evaluation ``slot``'s past and new keys and values: its heads of the block's grown layer
        (allocated, with the past copied in, by the first evaluation), its new ones written there."""
        past = self.layer.get_seq_length()
        if self.grown is None:
            self.grown = tuple(
                self._grown_tensor(old, new.size(-2))
                for old, new in ((self.layer.keys, keys), (self.layer.values, values))
            )
        heads = self.layer.keys.size(1) // self.slots
        own = slice(slot * heads, (slot + 1) * heads)
        self.grown[0][:, own, past:] = keys
        self.grown[1][:, own, past:] = values
        self.new[slot] = (keys, values)
        return self.grown[0][:, own], self.grown[1][:, own]

    @staticmethod
    def _grown_tensor(past: Tensor, new_positions: int) -> Tensor:
        grown = past.new_empty(past.shape[:-2] + (past.size(-2) + new_positions, past.size(-1)))
        grown[..., : past.size(-2), :] = past
        return grown

    def commit(self) -> None:
        """Append every evaluation's new keys and values to the block's layer of the cache."""
        if sorted(self.new) != list(range(self.slots)):
            raise RuntimeError(f"block {self.layer_idx} evaluated {sorted(self.new)} of its {self.slots} caches")
        if self.grown is not None:
            self.layer.keys, self.layer.values = self.grown
            return
        keys = torch.cat([self.new[slot][0] for slot in range(self.slots)], dim=1)
        values = torch.cat([self.new[slot][1] for slot in range(self.slots)], dim=1)
        self.cache.update(keys, values, self.layer_idx)
