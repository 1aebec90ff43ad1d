"""The ODE options of a model, each declared once as a dataclass field (:mod:`ode_seq.options`).

``StackOptions`` are given per side (``--encoder-ode-method``, ``--decoder-ode-method``, …),
``ODEOptions`` once for both stacks (``--ode-coefficients``, …); ``KindSelection`` chooses the layer
kind (``--layer-kind``), and every registered kind adds its own class (``TimeConfig``,
``StableConfig``), whose options the other kinds refuse (:func:`check_kind_options`).
:meth:`ModelOptions.read` reads all of them from fairseq's config and validates them, with
messages that name the option, the value and the fix.
"""

from __future__ import annotations

import difflib
import logging
import math
from dataclasses import dataclass, fields, replace
from typing import Any, ClassVar, Dict, List, Optional, Sequence, Tuple, Type

from ode_seq.fields import FIELD_FORMS, SCOPES
from ode_seq.layers import LAYER_KINDS
from ode_seq.layers.blocks import BlockClasses
from ode_seq.layers.kind import LayerKind
from ode_seq.layers.layer_history import HISTORY_TYPES
from ode_seq.options import SIDES, check_choice, choices_of, flag, option, option_name, read_options
from ode_seq.solvers import ADAPTIVE_METHODS, COEFFICIENT_MODES, CORRECTORS, TABLEAUS, ButcherTableau, get_tableau

logger = logging.getLogger(__name__)


def stack_methods(side: str) -> Tuple[str, ...]:
    """Fixed-grid methods everywhere; adaptive ones only in the encoder (never a causal decoder)."""
    return tuple(TABLEAUS) + (tuple(ADAPTIVE_METHODS) if side == "encoder" else ())


def stack_correctors(side: str) -> Tuple[str, ...]:
    """The public code's DLCL corrector exists for its encoder only."""
    return CORRECTORS if side == "encoder" else tuple(c for c in CORRECTORS if c != "dlcl")


@dataclass(frozen=True)
class StackOptions:
    """How the blocks of one stack integrate."""

    prefix: ClassVar[str] = "{side}_"
    ode_method: str = option("euler", "Runge-Kutta method of each {side} block", choices=stack_methods)
    ode_steps: Optional[int] = option(
        None,
        "fixed-grid steps per {side} block (default: the share group size, i.e. step "
        "size 1); may be changed at generation time with --model-overrides",
        metavar="N",
    )
    share_group_size: int = option(
        1, "share one layer across each group of K {side} layers, integrated over [0, K]", metavar="K"
    )
    layer_history: str = option("none", "DLCL aggregation of previous {side} block outputs", choices=HISTORY_TYPES)
    relative_positions: int = option(
        0, "Shaw relative position keys clipped at +-K in {side} self-attention (0 = off)", metavar="K"
    )
    ode_corrector: str = option(
        "none",
        "PCformer's corrector after the predictor (the {side} method, weighted by --ode-coefficients) "
        "of each step: none; multistep (paper: y' = y + alpha F(P) + sum_j beta_j k1 of this and the "
        "M previous steps of the stack); dlcl (public code, encoder only: F at a DLCL mix of "
        "normalised states, output another mix)",
        choices=stack_correctors,
    )
    ode_corrector_history: int = option(
        3,
        "M, the earlier steps whose first-stage values the {side} multistep corrector reads (3: "
        "the 4-step corrector of PCformer's Figure 1)",
        metavar="M",
    )

    @property
    def adaptive(self) -> bool:
        return self.ode_method in ADAPTIVE_METHODS

    @property
    def tableau(self) -> ButcherTableau:
        return get_tableau(self.ode_method)

    @property
    def stages(self) -> int:
        return 0 if self.adaptive else self.tableau.stages

    @property
    def steps(self) -> int:
        return self.ode_steps if self.ode_steps is not None else self.share_group_size

    def validate(self, side: str, layers: Any, ode: "ODEOptions", kind: Type[LayerKind]) -> None:
        """``layers``: fairseq's config of this side's layers (count, pre-norm, layer drop)."""
        if side == "decoder" and self.adaptive:
            raise ValueError(
                f"--decoder-ode-method {self.ode_method}: adaptive solvers cannot run a causal "
                "decoder (their batch-wide step sizes see future positions and incremental "
                "decoding needs a fixed grid); use a fixed-grid method such as rk4 with "
                "--decoder-ode-steps, or put the adaptive solver in the encoder"
            )
        check_choice(f"--{side}-ode-method", self.ode_method, choices_of(StackOptions, "ode_method", side))
        check_choice(f"--{side}-layer-history", self.layer_history, HISTORY_TYPES)
        if ode.field != "whole-layer" and not layers.normalize_before:
            raise ValueError(
                f"--ode-field {ode.field} needs pre-norm {side} layers: "
                f"pass --{side}-normalize-before, or use --ode-field whole-layer"
            )
        if self.relative_positions < 0:
            raise ValueError(
                f"--{side}-relative-positions must be >= 0 (0 disables relative positions), "
                f"got {self.relative_positions}"
            )
        if self.share_group_size < 1 or layers.layers % self.share_group_size:
            raise ValueError(
                f"--{side}-share-group-size {self.share_group_size} must be a positive divisor of "
                f"--{side}-layers {layers.layers}"
            )
        if self.ode_steps is not None and self.ode_steps < 1:
            raise ValueError(f"--{side}-ode-steps must be a positive integer, got {self.ode_steps}")
        if self.adaptive and self.ode_steps is not None:
            logger.warning(
                "--%s-ode-steps %d has no effect: adaptive --%s-ode-method %s chooses its own "
                "steps (their number is logged as %s_nfe)",
                side,
                self.ode_steps,
                side,
                self.ode_method,
                side,
            )
        if self.adaptive and ode.scope == "sublayer":
            raise ValueError(
                f"--ode-scope sublayer takes each step of a fixed grid sublayer by sublayer; "
                f"adaptive --{side}-ode-method {self.ode_method} has no fixed steps: choose a "
                "fixed-grid method such as rk4, or --ode-scope block"
            )
        if self.adaptive and ode.coefficients != "fixed":
            raise ValueError(
                f"--ode-coefficients {ode.coefficients} weights fixed Runge-Kutta stages; "
                f"adaptive --{side}-ode-method {self.ode_method} has none: use --ode-coefficients fixed"
            )
        if layers.layerdrop > 0 and self.layer_history != "none":
            raise ValueError(
                f"--{side}-layerdrop {layers.layerdrop} drops blocks, but with --{side}-layer-history "
                f"{self.layer_history} every block's output is a history state that later blocks "
                f"read: pass --{side}-layerdrop 0 or --{side}-layer-history none"
            )
        kind.check_method(side, self.ode_method, self.adaptive)
        if self.ode_corrector != "none":
            self.validate_corrector(side, layers, ode, kind)

    def validate_corrector(self, side: str, layers: Any, ode: "ODEOptions", kind: Type[LayerKind]) -> None:
        """What a predictor-corrector stack needs: a fixed grid, whole-block steps, every block run
        in order once per pass (the history starts at the first block)."""
        check_choice(f"--{side}-ode-corrector", self.ode_corrector, stack_correctors(side))
        corrector = f"--{side}-ode-corrector {self.ode_corrector}"
        if self.adaptive:
            raise ValueError(
                f"{corrector} corrects fixed-grid steps; adaptive --{side}-ode-method {self.ode_method} "
                "has none: choose a predictor such as heun or rk4"
            )
        if ode.scope != "block":
            raise ValueError(f"{corrector} corrects whole-block steps: pass --ode-scope block")
        if layers.layerdrop > 0:
            raise ValueError(
                f"{corrector} reads a history of every earlier step of the stack, which "
                f"--{side}-layerdrop {layers.layerdrop} would drop: pass --{side}-layerdrop 0"
            )
        if self.ode_corrector_history < 0:
            raise ValueError(f"--{side}-ode-corrector-history must be >= 0, got {self.ode_corrector_history}")
        if self.ode_corrector == "dlcl":
            if self.steps != 1 or self.share_group_size != 1 or self.layer_history != "none":
                raise ValueError(
                    f"{corrector} mixes one state per layer, as the public code: pass "
                    f"--{side}-share-group-size 1, --{side}-ode-steps 1 and --{side}-layer-history none"
                )
            if not layers.normalize_before:
                raise ValueError(
                    f"{corrector} mixes normalised states of a pre-norm stack: pass --{side}-normalize-before"
                )
        kind.check_corrector(side, self.ode_corrector)


@dataclass(frozen=True)
class ODEOptions:
    """What both stacks share: output weights, the form of F, adaptive tolerances, checks."""

    prefix: ClassVar[str] = "ode_"
    coefficients: str = option(
        "fixed",
        "output weights of multi-stage blocks: fixed (tableau b), learned (per-block "
        "per-token gate; sigmoid gate for 2 stages), learned-shared (one gate for a stack), "
        "free (trainable, init b), free-ones (trainable, init 1), ema (PCformer: w_i = "
        "beta(1-beta)^(s-i), beta trainable, init 0.5)",
        choices=COEFFICIENT_MODES,
    )
    field: str = option(
        "residual-branch",
        "vector field F: residual-branch = layer minus identity (paper; Euler "
        "is the pre-norm layer), parallel-branch = sublayers in parallel on the block input "
        "(Zhong et al.), whole-layer = layer with residuals (public code)",
        choices=FIELD_FORMS,
    )
    scope: str = option(
        "block",
        "what one Runge-Kutta update integrates: block = the whole layer's F (RK-block, "
        "the paper's), sublayer = each sublayer separately, F = LN -> sublayer -> dropout, one "
        "after the other (RK-sublayer; needs --ode-field residual-branch and a fixed grid)",
        choices=SCOPES,
    )
    rtol: float = option(1e-3, "adaptive solver rtol")
    atol: float = option(1e-4, "adaptive solver atol")
    min_step: float = option(0.0, "adaptive solver minimum step size")
    max_evaluations: int = option(
        1000,
        "adaptive solver: most field evaluations per solve (a solve needing more stops with "
        "an error naming the block and the tolerances)",
        metavar="N",
    )
    check_finite: bool = option(
        False,
        "check every Runge-Kutta stage output for inf/nan and report the block, step, "
        "stage and method (an error in fp32; a warning in fp16/bf16, where fairseq's loss "
        "scaler handles overflow)",
    )
    checkpoint_stages: bool = option(
        False, "recompute each Runge-Kutta stage in the backward pass (keeps stage inputs only)"
    )

    def validate(self) -> None:
        check_choice("--ode-coefficients", self.coefficients, COEFFICIENT_MODES)
        check_choice("--ode-field", self.field, FIELD_FORMS)
        check_choice("--ode-scope", self.scope, SCOPES)
        if self.scope == "sublayer" and self.field != "residual-branch":
            raise ValueError(
                f"--ode-scope sublayer gives every sublayer its own field LN -> sublayer -> "
                f"dropout, which --ode-field {self.field} does not describe: use --ode-field "
                "residual-branch, or --ode-scope block"
            )

    ADAPTIVE_CONTROLS: ClassVar[Tuple[str, ...]] = ("rtol", "atol", "min_step", "max_evaluations")

    def warn_unused_adaptive_options(self) -> None:
        """A warning naming the adaptive controls set away from their defaults without an
        adaptive method, which nothing reads."""
        fields = self.__dataclass_fields__
        changed = [name for name in self.ADAPTIVE_CONTROLS if getattr(self, name) != fields[name].default]
        if changed:
            logger.warning(
                "%s %s no effect: only the adaptive methods (--encoder-ode-method dopri5 or bosh3) read them",
                ", ".join(flag(ODEOptions, name) for name in changed),
                "has" if len(changed) == 1 else "have",
            )

    def validate_adaptive(self, interval: float) -> None:
        """The controls of an adaptive solve over [0, ``interval``]."""
        for name, value in (("rtol", self.rtol), ("atol", self.atol), ("min-step", self.min_step)):
            if not math.isfinite(value):
                raise ValueError(
                    f"--ode-{name} {value} is not a finite number: the adaptive solver's "
                    "tolerances must be finite and > 0 (e.g. --ode-rtol 1e-3 --ode-atol 1e-4) and "
                    "its minimum step finite and >= 0"
                )
        if self.rtol <= 0 or self.atol <= 0 or self.min_step < 0:
            raise ValueError(
                f"--ode-rtol and --ode-atol must be > 0 and --ode-min-step >= 0 "
                f"(got {self.rtol}, {self.atol}, {self.min_step})"
            )
        if self.min_step >= interval:
            raise ValueError(
                f"--ode-min-step {self.min_step} is not shorter than the interval [0, {interval:g}] "
                "of an adaptive block: every step would be accepted without error control; pass "
                f"a smaller --ode-min-step (e.g. 0, the default)"
            )
        if self.max_evaluations < 1:
            raise ValueError(
                f"--ode-max-evaluations must be a positive number of field evaluations per "
                f"solve, got {self.max_evaluations} (default 1000)"
            )


@dataclass(frozen=True)
class ChangeAllowance:
    """Which of the options a checkpoint records (:mod:`ode_seq.training_data.model_options`) a
    resumed training run may change on purpose."""

    prefix: ClassVar[str] = ""
    allow_changed_options: Optional[str] = option(
        None,
        "comma-separated options (e.g. decoder_ode_method) that may differ from those the checkpoint "
        "to resume was trained with, such as another method for step adaptation; without it, "
        "fairseq-train refuses to resume a checkpoint as a model with other options",
        metavar="NAMES",
    )


def layer_kinds(side: Optional[str] = None) -> Tuple[str, ...]:
    """The registered layer kinds (:data:`ode_seq.layers.LAYER_KINDS`)."""
    return tuple(LAYER_KINDS)


@dataclass(frozen=True)
class KindSelection:
    """The layer kind of every block of the model."""

    prefix: ClassVar[str] = ""
    layer_kind: str = option(
        "standard",
        "the layer every block integrates: standard (fairseq's), time-dependent (weights theta(tau), "
        "a stack is one block over its depth), stable (CenterNorm, spectral-norm-1 projections), or a "
        "kind a plugin registers; a kind's own options (--time-* of time-dependent, "
        "--attention-kernel of stable, ...) are refused with the other kinds",
        choices=layer_kinds,
    )

    @staticmethod
    def of(cfg: Any) -> str:
        """The layer kind fairseq's config ``cfg`` selects (standard when it names none)."""
        return getattr(cfg, "layer_kind", None) or "standard"


def kind_classes(kind: str) -> BlockClasses:
    """The block classes of layer kind ``kind``; ValueError naming the registered kinds."""
    if kind not in LAYER_KINDS:
        raise ValueError(
            f"--layer-kind {kind!r} is not a registered layer kind; choose one of: {', '.join(LAYER_KINDS)} "
            "(a kind defined outside ode-seq is registered when its module is imported, e.g. by --user-dir)"
        )
    return LAYER_KINDS[kind]


def kind_option_owners(extra: Sequence[Tuple[type, str]] = ()) -> Dict[type, List[str]]:
    """Every registered kind's options class, and the (options class, kind) pairs ``extra`` (a
    model's options that one kind takes), with the kinds that take it."""
    owners: Dict[type, List[str]] = {}
    pairs = [(classes.kind.options_class, name) for name, classes in LAYER_KINDS.items()]
    for options_class, kind in [*pairs, *extra]:
        if options_class is not None:
            owners.setdefault(options_class, []).append(kind)
    return owners


def check_kind_options(cfg: Any, kind: str, owners: Dict[type, List[str]]) -> None:
    """ValueError for an option of another layer kind than ``kind`` set away from its default in
    fairseq's config ``cfg`` (``owners``: :func:`kind_option_owners`): no block would read it."""
    for options_class, kinds in owners.items():
        if kind in kinds:
            continue
        for f in fields(options_class):
            value = getattr(cfg, option_name(options_class, f.name), None)
            if value is None or value == f.default:
                continue
            name = flag(options_class, f.name)
            given = name if value is True else f"{name} {value}"
            raise ValueError(
                f"{given} is an option of the {' and '.join(kinds)} layer kind, but the model's layers are "
                f"of kind {kind} (--layer-kind, or its --arch), which would ignore it: pass --layer-kind "
                f"{kinds[0]} (or an --arch of that kind), or leave {name} out"
            )


def check_misspelt_options(cfg: Any, classes: Sequence[Tuple[type, Optional[str]]]) -> None:
    """ValueError for a setting in fairseq's config ``cfg`` whose name is one letter or so away
    from an option of ``classes`` ((options class, side) pairs) without being one: a misspelt
    ``--model-overrides`` key, which fairseq would store and nothing would read."""
    names = [option_name(c, f.name, side) for c, side in classes for f in fields(c)]
    settings = set(vars(cfg))  # fairseq keeps {side}_* settings in cfg.{side}
    for side in SIDES:
        settings.update(f"{side}_{key}" for key in getattr(getattr(cfg, side, None), "__dict__", {}))
    for key in sorted(settings):
        close = [] if key in names else difflib.get_close_matches(key, names, n=1, cutoff=0.9)
        if close:
            raise ValueError(
                f"{key} is not an option of this model, so it would be ignored; did you mean "
                f"{close[0]}? (check the keys of --model-overrides)"
            )


@dataclass(frozen=True)
class ModelOptions:
    """Every ODE option of one model: both stacks, the shared ones, the layer kind's."""

    encoder: StackOptions
    decoder: StackOptions
    ode: ODEOptions
    kind: Any = None

    def stack(self, side: str) -> StackOptions:
        return self.encoder if side == "encoder" else self.decoder

    @classmethod
    def read(
        cls, cfg: Any, kind: Type[LayerKind], sides: Sequence[str], declared: Sequence[Tuple[type, Optional[str]]]
    ) -> "ModelOptions":
        """The options in fairseq's model config ``cfg`` (a TransformerConfig) for a model of
        layer kind ``kind`` with the stacks ``sides`` (a language model has only the decoder;
        a missing stack keeps the defaults and is not validated), validated; ``declared``: the
        (options class, side) pairs of every option the model declares."""
        stacks = []
        for side in SIDES:
            stack = read_options(cfg, StackOptions, side) if side in sides else StackOptions()
            if kind.one_block_per_stack and side in sides:
                stack = replace(stack, share_group_size=getattr(cfg, side).layers)
            stacks.append(stack)
        kind_options = read_options(cfg, kind.options_class) if kind.options_class else None
        options = cls(*stacks, read_options(cfg, ODEOptions), kind_options)
        check_misspelt_options(cfg, declared)
        options.validate(cfg, kind, sides)
        return options

    def validate(self, cfg: Any, kind: Type[LayerKind], sides: Sequence[str] = SIDES) -> None:
        self.ode.validate()
        for side in sides:
            self.stack(side).validate(side, getattr(cfg, side), self.ode, kind)
        correctors = [f"--{side}-ode-corrector" for side in sides if self.stack(side).ode_corrector != "none"]
        if correctors and cfg.checkpoint_activations:
            raise ValueError(
                f"{' and '.join(correctors)}: a corrector reads the history of the stack's earlier "
                "steps, which --checkpoint-activations would recompute out of order in the backward "
                "pass: use --ode-checkpoint-stages instead"
            )
        if self.ode.checkpoint_stages and cfg.checkpoint_activations:
            raise ValueError(
                "--ode-checkpoint-stages and --checkpoint-activations both checkpoint ODE blocks: "
                "pass --checkpoint-activations to keep only block inputs (least memory) or "
                "--ode-checkpoint-stages to keep stage inputs (less recomputation), not both"
            )
        if self.encoder.adaptive or self.decoder.adaptive:
            self.ode.validate_adaptive(float(self.encoder.share_group_size))
        else:
            self.ode.warn_unused_adaptive_options()
        ode = self.ode
        if (
            ode.coefficients != "fixed"
            and not self.encoder.adaptive
            and max(self.stack(side).stages for side in sides) == 1
        ):
            methods = " and ".join(f"--{side}-ode-method {self.stack(side).ode_method}" for side in sides)
            raise ValueError(
                f"--ode-coefficients {ode.coefficients} weights the stages of multi-stage "
                f"methods, but {methods} {'have' if len(sides) > 1 else 'has'} one stage; choose a method "
                "such as heun or rk4, or --ode-coefficients fixed"
            )
        if self.kind is not None:
            self.kind.validate()
