"""Options of one ODE stack (encoder or decoder), validated with messages that name the fix."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from .adaptive import ADAPTIVE_METHODS, AdaptiveSolver
from .coefficients import COEFFICIENT_MODES
from .fields import FIELD_FORMS
from .layer_history import HISTORY_TYPES
from .tableaus import TABLEAUS, ButcherTableau, get_tableau

SIDES = ("encoder", "decoder")


def _choice(option: str, value: Any, valid) -> None:
    if value not in valid:
        raise ValueError(f"{option} {value!r} is not valid; choose one of: {', '.join(valid)}")


@dataclass(frozen=True)
class ODEStackConfig:
    """How the blocks of one stack integrate: method, output weights, F form, grid, history.

    ``share_group_size`` k: each group of k layers shares one layer and integrates [0, k] with
    ``steps`` steps (default k, i.e. step size 1).
    """

    side: str
    method: str = "euler"
    coefficients: str = "fixed"
    field: str = "residual-branch"
    layer_history: str = "none"
    relative_positions: int = 0
    checkpoint_stages: bool = False
    share_group_size: int = 1
    steps: Optional[int] = None
    rtol: float = 1e-3
    atol: float = 1e-4
    min_step: float = 0.0
    check_finite: bool = False

    @classmethod
    def from_args(cls, args: Any, side: str) -> "ODEStackConfig":
        """Read --{side}-ode-method, --ode-coefficients, … from a fairseq args/cfg object."""
        d = cls(side)

        def get(name: str, default: Any) -> Any:
            value = getattr(args, name, None)
            return default if value is None else value

        return cls(
            side=side,
            method=get(f"{side}_ode_method", d.method),
            coefficients=get("ode_coefficients", d.coefficients),
            field=get("ode_field", d.field),
            layer_history=get(f"{side}_layer_history", d.layer_history),
            relative_positions=get(f"{side}_relative_positions", d.relative_positions),
            checkpoint_stages=get("ode_checkpoint_stages", d.checkpoint_stages),
            share_group_size=get(f"{side}_share_group_size", d.share_group_size),
            steps=get(f"{side}_ode_steps", d.steps),
            rtol=get("ode_rtol", d.rtol),
            atol=get("ode_atol", d.atol),
            min_step=get("ode_min_step", d.min_step),
            check_finite=get("ode_check_finite", d.check_finite),
        )

    @property
    def is_adaptive(self) -> bool:
        return self.method in ADAPTIVE_METHODS

    @property
    def tableau(self) -> ButcherTableau:
        """The fixed-grid method (Euler stands in for adaptive solvers, which need no tableau)."""
        return get_tableau("euler" if self.is_adaptive else self.method)

    @property
    def step_count(self) -> int:
        return self.steps if self.steps is not None else self.share_group_size

    @property
    def stack_coefficients(self) -> str:
        """Coefficients act on multi-stage stacks; a one-stage (Euler) stack is a plain stack."""
        return "fixed" if self.tableau.stages == 1 else self.coefficients

    def adaptive_solver(self) -> Optional[AdaptiveSolver]:
        if not self.is_adaptive:
            return None
        return AdaptiveSolver(
            self.method, self.rtol, self.atol, self.min_step, float(self.share_group_size)
        )

    def validate(self, normalize_before: bool, checkpoint_activations: bool, layers: int) -> None:
        side = self.side
        methods = tuple(TABLEAUS) + (ADAPTIVE_METHODS if side == "encoder" else ())
        if side == "decoder" and self.is_adaptive:
            raise ValueError(
                f"--decoder-ode-method {self.method}: adaptive solvers cannot run a causal "
                "decoder (their batch-wide step sizes see future positions and incremental "
                "decoding needs a fixed grid); use a fixed-grid method such as rk4 with "
                "--decoder-ode-steps, or put the adaptive solver in the encoder"
            )
        _choice(f"--{side}-ode-method", self.method, methods)
        _choice("--ode-coefficients", self.coefficients, COEFFICIENT_MODES)
        _choice("--ode-field", self.field, FIELD_FORMS)
        _choice(f"--{side}-layer-history", self.layer_history, HISTORY_TYPES)
        if self.field != "whole-layer" and not normalize_before:
            raise ValueError(
                f"--ode-field {self.field} needs pre-norm {side} layers: "
                f"pass --{side}-normalize-before, or use --ode-field whole-layer"
            )
        if self.relative_positions < 0:
            raise ValueError(
                f"--{side}-relative-positions must be >= 0 (0 disables relative positions), "
                f"got {self.relative_positions}"
            )
        if self.checkpoint_stages and checkpoint_activations:
            raise ValueError(
                "--ode-checkpoint-stages and --checkpoint-activations both checkpoint ODE blocks: "
                "pass --checkpoint-activations to keep only block inputs (least memory) or "
                "--ode-checkpoint-stages to keep stage inputs (less recomputation), not both"
            )
        if self.share_group_size < 1 or layers % self.share_group_size:
            raise ValueError(
                f"--{side}-share-group-size {self.share_group_size} must be a positive divisor of "
                f"--{side}-layers {layers}"
            )
        if self.steps is not None and self.steps < 1:
            raise ValueError(f"--{side}-ode-steps must be a positive integer, got {self.steps}")
        if self.is_adaptive:
            if self.coefficients != "fixed":
                raise ValueError(
                    f"--ode-coefficients {self.coefficients} weights fixed Runge-Kutta stages; "
                    f"adaptive --{side}-ode-method {self.method} has none: use --ode-coefficients fixed"
                )
            self.adaptive_solver()


def validate_model(encoder: ODEStackConfig, decoder: ODEStackConfig) -> None:
    """Checks that involve both stacks (an adaptive encoder is checked by its own stack)."""
    if encoder.coefficients != "fixed" and not encoder.is_adaptive and max(
        encoder.tableau.stages, decoder.tableau.stages
    ) == 1:
        raise ValueError(
            f"--ode-coefficients {encoder.coefficients} weights the stages of multi-stage "
            f"methods, but --encoder-ode-method {encoder.method} and --decoder-ode-method "
            f"{decoder.method} have one stage; choose a method such as heun or rk4, "
            "or --ode-coefficients fixed"
        )
