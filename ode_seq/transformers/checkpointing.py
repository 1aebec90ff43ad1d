"""Gradient checkpointing of ODE blocks per stage. transformers' ``activation_checkpointing_enable``
(``gradient_checkpointing_enable``, Trainer's ``activation_checkpointing=True``) checkpoints each
decoder layer whole: the backward pass would recompute all of a block's stages at once. Here
transformers still decides which layers checkpoint (``every_n_layers``) and still drops their
key/value cache while training, but such a block's solver checkpoints every field evaluation
instead (``FixedGridSolver.checkpoint_stages``): the forward pass keeps each stage's input z_i
only, and the backward pass recomputes one stage at a time, last first. Always non-reentrant
(``torch.utils.checkpoint`` with ``use_reentrant=False``), whatever
``activation_checkpointing_kwargs`` say."""

from dataclasses import replace
from typing import Any, Callable

from torch.utils.checkpoint import checkpoint
from transformers.modeling_layers import GradientCheckpointingLayer


def run_whole(function: Callable, *args: Any) -> Any:
    """The layer's forward as it is, in place of transformers' checkpoint around it."""
    return function(*args)


class StageCheckpointing:
    """A mixin of a ``PreTrainedModel`` whose ODE blocks (layers with a ``solver``) checkpoint per
    stage where transformers would checkpoint them whole."""

    def _set_gradient_checkpointing(
        self, enable: bool = True, gradient_checkpointing_func: Callable = checkpoint, every_n_layers: int = 1
    ) -> None:
        super()._set_gradient_checkpointing(enable, gradient_checkpointing_func, every_n_layers)
        for layer in self.modules():
            if isinstance(layer, GradientCheckpointingLayer) and hasattr(layer, "solver"):
                layer.solver = replace(layer.solver, checkpoint_stages=layer.gradient_checkpointing)
                layer._gradient_checkpointing_func = run_whole
