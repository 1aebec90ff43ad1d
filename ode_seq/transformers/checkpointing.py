"""Gradient checkpointing of ODE blocks per stage. transformers' ``gradient_checkpointing_enable``
(and Trainer's ``gradient_checkpointing=True``) would checkpoint each decoder layer whole: the
backward pass recomputes all of a block's stages at once. Here each block's solver checkpoints
every field evaluation instead (``FixedGridSolver.checkpoint_stages``): the forward pass keeps each
stage's input z_i only, and the backward pass recomputes one stage at a time, last first. Always
non-reentrant (``torch.utils.checkpoint`` with ``use_reentrant=False``), whatever
``gradient_checkpointing_kwargs`` say."""

from dataclasses import replace
from typing import Callable

from torch.utils.checkpoint import checkpoint
from transformers.modeling_layers import GradientCheckpointingLayer


class StageCheckpointing:
    """A mixin of a ``PreTrainedModel`` whose ODE blocks (layers with a ``solver``) checkpoint per
    stage when transformers enables gradient checkpointing (``every_n_layers`` as transformers
    counts it); the model itself still reports ``is_activation_checkpointing``."""

    def _set_gradient_checkpointing(
        self, enable: bool = True, gradient_checkpointing_func: Callable = checkpoint, every_n_layers: int = 1
    ) -> None:
        super()._set_gradient_checkpointing(enable, gradient_checkpointing_func, every_n_layers)
        for layer in self.modules():
            if isinstance(layer, GradientCheckpointingLayer) and hasattr(layer, "solver"):
                layer.solver = replace(layer.solver, checkpoint_stages=layer.gradient_checkpointing)
                layer.gradient_checkpointing = False
