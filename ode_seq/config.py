"""Options of one ODE stack (encoder or decoder), validated with messages that name the fix."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .coefficients import COEFFICIENT_MODES
from .fields import FIELD_FORMS
from .layer_history import HISTORY_TYPES
from .tableaus import TABLEAUS, ButcherTableau, get_tableau


def _choice(option: str, value: Any, valid) -> None:
    if value not in valid:
        raise ValueError(f"{option} {value!r} is not valid; choose one of: {', '.join(valid)}")


@dataclass(frozen=True)
class ODEStackConfig:
    """How the blocks of one stack integrate: method, output weights, F form, history."""

    side: str
    method: str = "euler"
    coefficients: str = "fixed"
    field: str = "residual-branch"
    layer_history: str = "none"
    relative_positions: int = 0
    checkpoint_stages: bool = False

    @classmethod
    def from_args(cls, args: Any, side: str) -> "ODEStackConfig":
        """Read --{side}-ode-method, --ode-coefficients, … from a fairseq args/cfg object."""
        defaults = cls(side)
        return cls(
            side=side,
            method=getattr(args, f"{side}_ode_method", defaults.method),
            coefficients=getattr(args, "ode_coefficients", defaults.coefficients),
            field=getattr(args, "ode_field", defaults.field),
            layer_history=getattr(args, f"{side}_layer_history", defaults.layer_history),
            relative_positions=getattr(args, f"{side}_relative_positions", 0),
            checkpoint_stages=getattr(args, "ode_checkpoint_stages", False),
        )

    @property
    def tableau(self) -> ButcherTableau:
        return get_tableau(self.method)

    @property
    def stack_coefficients(self) -> str:
        """Coefficients act on multi-stage stacks; a one-stage (Euler) stack is a plain stack."""
        return "fixed" if self.tableau.stages == 1 else self.coefficients

    def validate(self, normalize_before: bool, checkpoint_activations: bool) -> None:
        side = self.side
        _choice(f"--{side}-ode-method", self.method, tuple(TABLEAUS))
        _choice("--ode-coefficients", self.coefficients, COEFFICIENT_MODES)
        _choice("--ode-field", self.field, FIELD_FORMS)
        _choice(f"--{side}-layer-history", self.layer_history, HISTORY_TYPES)
        if self.field == "residual-branch" and not normalize_before:
            raise ValueError(
                f"--ode-field residual-branch (the paper's F) needs pre-norm {side} layers: "
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


def validate_model(encoder: ODEStackConfig, decoder: ODEStackConfig) -> None:
    """Checks that involve both stacks."""
    if encoder.coefficients != "fixed" and max(
        encoder.tableau.stages, decoder.tableau.stages
    ) == 1:
        raise ValueError(
            f"--ode-coefficients {encoder.coefficients} weights the stages of multi-stage "
            f"methods, but --encoder-ode-method {encoder.method} and --decoder-ode-method "
            f"{decoder.method} have one stage; choose a method such as heun or rk4, "
            "or --ode-coefficients fixed"
        )
