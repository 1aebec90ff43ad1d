"""fairseq model ``ode_transformer``: ODE Transformer (Li et al., 2022) on fairseq's Transformer.

Each encoder/decoder layer becomes a Runge–Kutta block (:mod:`ode_seq.layers.blocks`) through
fairseq's ``build_encoder`` / ``build_decoder`` hooks; everything else is fairseq's. The blocks'
layer kind is an option, ``--layer-kind`` (standard, time-dependent, stable, or any kind
registered in :data:`ode_seq.layers.LAYER_KINDS`), and every kind's options are the model's.

``--init-from-teacher PATH`` (stable kind) copies embeddings, positions, final norms and output
projection from a pre-norm fairseq transformer when the model is built for training; the model's
args then record that it was done, so loading the student's checkpoints never needs the teacher.
"""

from __future__ import annotations

import logging
from dataclasses import fields
from typing import Any, ClassVar, Collection, Dict, List, Optional, Sequence, Tuple

from fairseq.models import register_model
from fairseq.models.transformer import TransformerConfig, TransformerModel
from torch import Tensor, nn

from ode_seq.layers.blocks import BlockClasses
from ode_seq.options import SIDES, add_arguments, option_name
from ode_seq.solvers import EMAWeights, FreeWeights, MultistepCorrector, StageGate, StateHistory

from .config import (
    ChangeAllowance,
    KindSelection,
    ModelOptions,
    ODEOptions,
    StackOptions,
    check_kind_options,
    kind_classes,
    kind_option_owners,
)
from .stacks import ODETransformerDecoder, ODETransformerEncoder
from .teacher import TeacherInitialisation, copy_interface, interface_parameters, load_teacher

logger = logging.getLogger(__name__)

PARAMETER_OPTIONS = (
    "--ode-coefficients, --encoder-layers/--decoder-layers, --*-share-group-size, "
    "--*-layer-history, --*-relative-positions, --*-ode-corrector and --*-ode-corrector-history, "
    "embedding and FFN sizes, the --time-* options"
)


def stage_count_mismatch(reshaped: Sequence[str], checkpoint: Dict[str, Tensor]) -> str:
    """The refusal of per-stage output weights trained for another number of stages."""
    name = reshaped[0]
    return (
        f"the checkpoint's Runge-Kutta output weights ({name}, shape {tuple(checkpoint[name].shape)}) "
        "were trained for another number of stages than the --*-ode-method of this model has: "
        "--ode-coefficients free, free-ones, learned and learned-shared hold weights per stage, so "
        "--model-overrides cannot change the stage count of their method (such as IIET's "
        "iterations, iie4 -> iie2); keep the trained method, or train with --ode-coefficients fixed "
        "or ema, whose parameters are the same for every stage count"
    )


def parameter_mismatch(
    model: Dict[str, Tensor], checkpoint: Dict[str, Tensor], stage_weights: Collection[str] = ()
) -> str:
    """What differs between a model's state dict and a checkpoint's, and what to do about it;
    ``stage_weights``: the model's keys whose shape depends on its methods' stage counts."""
    for side, name in (("source", "encoder.embed_tokens.weight"), ("target", "decoder.embed_tokens.weight")):
        if name in model and name in checkpoint and model[name].size(0) != checkpoint[name].size(0):
            return (
                f"the data directory's {side} dictionary has {model[name].size(0)} symbols but "
                f"the checkpoint's {name} has "
                f"{checkpoint[name].size(0)} rows: load the model with the data directory "
                "(dict.*.txt) it was trained with"
            )
    missing = [k for k in model if k not in checkpoint]
    unexpected = [k for k in checkpoint if k not in model]
    reshaped = [k for k in model if k in checkpoint and model[k].shape != checkpoint[k].shape]
    if reshaped and not missing and not unexpected and set(reshaped) <= set(stage_weights):
        return stage_count_mismatch(reshaped, checkpoint)
    found = []
    for what, names in (
        ("missing from the checkpoint", missing),
        ("not in the model", unexpected),
        ("of another shape", reshaped),
    ):
        if names:
            more = f" and {len(names) - 1} more" if len(names) > 1 else ""
            found.append(f"{len(names)} parameters {what} ({names[0]}{more})")
    return (
        f"the checkpoint's parameters do not fit the model built from its options and any "
        f"--model-overrides: {'; '.join(found)}. Options that add or reshape parameters "
        f"({PARAMETER_OPTIONS}) cannot be changed when loading a checkpoint; to train with them, "
        "fine-tune: fairseq-train --finetune-from-model CHECKPOINT with the new options. "
        "--model-overrides may change --*-ode-steps, --ode-rtol/--ode-atol, and --*-ode-method "
        "between methods whose parameters are the same"
    )


# The modules holding a block's trainable output weights (--ode-coefficients other than fixed)
# and a stack's corrector weights (--*-ode-corrector).
COEFFICIENT_MODULES = (StageGate, FreeWeights, EMAWeights, MultistepCorrector, StateHistory)


# Those whose shape depends on the method's stage count: per-stage weights and gates.
STAGE_WEIGHT_MODULES = (StageGate, FreeWeights)


def coefficient_parameters(
    model: nn.Module, prefix: str, modules: Tuple[type, ...] = COEFFICIENT_MODULES
) -> Dict[str, Tensor]:
    """Every state-dict key of ``model`` (under ``prefix``) that is a Runge–Kutta output weight or
    gate parameter (of one of ``modules``), with its current value; a shared gate appears under
    each block that uses it."""
    return {
        f"{prefix}{module_name}.{name}": value
        for module_name, module in model.named_modules(remove_duplicate=False)
        if isinstance(module, modules)
        for name, value in module.state_dict().items()
    }


def initialise_missing_coefficients(model: nn.Module, state_dict: Dict[str, Tensor], prefix: str) -> None:
    """Give ``state_dict`` the output weights and gates it lacks (a vanilla or Euler checkpoint has
    none) at ``model``'s initial values; any other missing parameter is left to fail loading."""
    missing = {k: v for k, v in coefficient_parameters(model, prefix).items() if k not in state_dict}
    if missing:
        state_dict.update({k: v.detach().clone() for k, v in missing.items()})
        logger.info(
            f"--finetune-from-model: the checkpoint lacks {len(missing)} Runge-Kutta coefficient/gate "
            f"parameters of this architecture ({sum(v.numel() for v in missing.values())} values): "
            "initialised at the new model's initial values"
        )


class ODEModel:
    """What every ODE model adds to its fairseq model: the ODE options of its stacks, the layer
    kind and every kind's options, checkpoint loading that explains parameters that do not fit,
    and the update count (for the curricula of trajectory distillation). A model is this mixin
    over a fairseq model class, the ``stacks`` it has, the fairseq options (``add_fairseq_args``)
    it starts from and its own options that one kind takes (``kind_only_options``)."""

    stacks: ClassVar[Tuple[str, ...]] = SIDES
    kind_only_options: ClassVar[Tuple[Tuple[type, str], ...]] = ()
    """(options class, layer kind): options of the model that only blocks of that kind allow."""
    num_updates: int = 0

    @property
    def layer_kind(self) -> str:
        """The layer kind of the model's blocks (``--layer-kind``)."""
        return KindSelection.of(self.args)

    def set_num_updates(self, num_updates: int) -> None:
        super().set_num_updates(num_updates)
        self.num_updates = num_updates

    def interface_parameters(self) -> List[nn.Parameter]:
        """Embeddings, positions, final norms and output projection (what a teacher provides)."""
        return interface_parameters(self)

    @classmethod
    def option_classes(cls) -> List[Tuple[type, Optional[str]]]:
        """(options class, side) of every option of the model beyond its fairseq model's: its
        stacks', the shared ones, the layer kind and every kind's own."""
        stacks: List[Tuple[type, Optional[str]]] = [(StackOptions, side) for side in cls.stacks]
        shared: List[Tuple[type, Optional[str]]] = [(ODEOptions, None), (ChangeAllowance, None), (KindSelection, None)]
        kinds = kind_option_owners(cls.kind_only_options)
        return stacks + shared + [(options_class, None) for options_class in kinds]

    @classmethod
    def add_fairseq_args(cls, parser) -> None:
        """The options of the fairseq model this one extends."""
        raise NotImplementedError

    @classmethod
    def add_args(cls, parser) -> None:
        cls.add_fairseq_args(parser)
        for options_class, side in cls.option_classes():
            add_arguments(parser, options_class, side)

    @classmethod
    def stack_inputs(cls, cfg) -> Tuple[TransformerConfig, ModelOptions, BlockClasses]:
        """fairseq's config, the model's ODE options (read and validated), the block classes of
        its layer kind (whose options only it may set)."""
        cfg = TransformerConfig.from_namespace(cfg)
        kind = KindSelection.of(cfg)
        classes = kind_classes(kind)
        check_kind_options(cfg, kind, kind_option_owners(cls.kind_only_options))
        return cfg, ModelOptions.read(cfg, classes.kind, cls.stacks, cls.option_classes()), classes

    def resolve_model_options(self, declared: Dict[str, Any]) -> Dict[str, Any]:
        """The options that define this model (``declared``: as configured) as its stacks compute
        with them: each stack's share group and steps as its solver takes them (the group size when
        --*-ode-steps is unset; none for an adaptive method, which chooses its own), without the
        options it does not read (the adaptive tolerances without an adaptive stack, a corrector's
        history without a corrector, the other layer kinds' options)."""
        resolved = dict(declared)
        stacks = [(side, getattr(self, side).ode) for side in self.stacks]
        for side, stack in stacks:
            resolved[f"{side}_share_group_size"] = stack.share_group_size
            resolved[f"{side}_ode_steps"] = None if stack.adaptive else stack.steps
            if stack.ode_corrector == "none":
                resolved.pop(f"{side}_ode_corrector_history", None)
        if not any(stack.adaptive for _, stack in stacks):
            for name in ODEOptions.ADAPTIVE_CONTROLS:
                resolved.pop(option_name(ODEOptions, name), None)
        for options_class, kinds in kind_option_owners(self.kind_only_options).items():
            if self.layer_kind not in kinds:
                for f in fields(options_class):
                    resolved.pop(option_name(options_class, f.name), None)
        return resolved

    def upgrade_state_dict_named(self, state_dict: Dict[str, Tensor], name: str) -> None:
        """fairseq's upgrades; then, when fine-tuning (--finetune-from-model), the output weights and
        gates that the checkpoint lacks start at their initial values (fairseq calls this before
        ``load_state_dict``), so a vanilla or Euler checkpoint loads into learned coefficients."""
        super().upgrade_state_dict_named(state_dict, name)
        if getattr(self.args, "finetune_from_model", None):
            initialise_missing_coefficients(self, state_dict, f"{name}." if name else "")

    def load_state_dict(self, state_dict, strict=True, model_cfg=None, args=None):
        """fairseq's loading, whose error for parameters that do not fit says why and what to do."""
        try:
            return super().load_state_dict(state_dict, strict=strict, model_cfg=model_cfg, args=args)
        except RuntimeError as error:
            if "Error(s) in loading state_dict" not in str(error):
                raise
            stage_weights = coefficient_parameters(self, "", STAGE_WEIGHT_MODULES)
            raise RuntimeError(parameter_mismatch(self.state_dict(), state_dict, stage_weights)) from error


@register_model("ode_transformer")
class ODETransformerModel(ODEModel, TransformerModel):
    """Transformer whose layers are Runge–Kutta blocks; see ``--encoder-ode-method`` and
    ``--layer-kind``."""

    kind_only_options: ClassVar[Tuple[Tuple[type, str], ...]] = ((TeacherInitialisation, "stable"),)

    @classmethod
    def add_fairseq_args(cls, parser) -> None:
        TransformerModel.add_args(parser)

    @classmethod
    def build_model(cls, args, task):
        model = super().build_model(args, task)
        if getattr(args, "init_from_teacher", None) and not getattr(args, "initialised_from_teacher", False):
            copy_interface(model, load_teacher(args.init_from_teacher, task))
            args.initialised_from_teacher = True
        return model

    @classmethod
    def build_encoder(cls, cfg, src_dict, embed_tokens):
        cfg, options, classes = cls.stack_inputs(cfg)
        return ODETransformerEncoder(cfg, src_dict, embed_tokens, options, classes)

    @classmethod
    def build_decoder(cls, cfg, tgt_dict, embed_tokens):
        cfg, options, classes = cls.stack_inputs(cfg)
        return ODETransformerDecoder(
            cfg, tgt_dict, embed_tokens, options, classes, no_encoder_attn=cfg.no_cross_attention
        )
