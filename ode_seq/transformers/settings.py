"""The decoder ODE settings of an ODE config (torch and transformers only): one table of fields
that every family's config carries, a factory of those configs, and the checks of the values.

- ``decoder_ode_method``: a fixed-grid tableau of :mod:`ode_seq.solvers.tableaus` (euler, heun,
  rk4, …, IIET's ``iie{r}``, r iterations of implicit Euler's fixed point).
- ``decoder_ode_steps`` N over [0, ``decoder_ode_interval``] T: steps of size h = T/N.
- ``ode_coefficients``: the stage weights (:mod:`ode_seq.solvers.coefficients`): fixed (the
  tableau's b), learned (a per-token gate per block), learned-shared (one gate for the stack),
  free, free-ones, ema (PCformer's β(1−β)^{s−i}).
- ``ode_field``: F of the layer (:mod:`ode_seq.fields`): residual-branch (Euler with h = 1 is the
  family's layer), parallel-branch, whole-layer.
- ``ode_scope``: block (one Runge–Kutta update of F) or sublayer (RK-sublayer: the attention
  branch, then the MLP branch, each its own update, a Lie–Trotter splitting).
- ``decoder_ode_corrector``: none, or PCformer's multistep corrector over the first-stage values of
  this and ``decoder_ode_corrector_history`` m earlier steps of the stack
  (:mod:`ode_seq.solvers.predictor_corrector`).
"""

from typing import Any, Dict, Tuple

from ode_seq.fields import FIELD_FORMS, SCOPES
from ode_seq.solvers.coefficients import COEFFICIENT_MODES
from ode_seq.solvers.predictor_corrector import CORRECTORS
from ode_seq.solvers.tableaus import TABLEAUS

# name: (type, default)
ODE_SETTINGS: Dict[str, Tuple[type, Any]] = {
    "decoder_ode_method": (str, "euler"),
    "decoder_ode_steps": (int, 1),
    "decoder_ode_interval": (float, 1.0),
    "ode_coefficients": (str, "fixed"),
    "ode_field": (str, "residual-branch"),
    "ode_scope": (str, "block"),
    "decoder_ode_corrector": (str, "none"),
    "decoder_ode_corrector_history": (int, 3),
}
# The public code's DLCL corrector exists for encoders only (as ode-seq's decoders).
DECODER_CORRECTORS = tuple(corrector for corrector in CORRECTORS if corrector != "dlcl")


def ode_config_class(base: type, model_type: str, name: str, module: str) -> type:
    """A config class ``name`` of ``model_type`` (a global of ``module``): the family's ``base``
    config plus the fields of ``ODE_SETTINGS`` (transformers makes every config class a dataclass
    of its annotations). Built from a family's folder (upcycling), it stays of ``model_type``: the
    folder's own type is dropped."""

    def __post_init__(self: Any, **kwargs: Any) -> None:
        kwargs.pop("model_type", None)
        base.__post_init__(self, **kwargs)

    namespace = {
        "__post_init__": __post_init__,
        "__module__": module,
        "__qualname__": name,
        "__doc__": f"{base.__name__}'s options plus the decoder ODE settings of :mod:`{__name__}`.",
        "__annotations__": {field: kind for field, (kind, _) in ODE_SETTINGS.items()},
        "model_type": model_type,
        **{field: default for field, (_, default) in ODE_SETTINGS.items()},
    }
    return type(name, (base,), namespace)


def _choice(config: Any, field: str, choices: Tuple[str, ...]) -> None:
    value = getattr(config, field)
    if value not in choices:
        raise ValueError(f"{field} {value!r} is not valid; choose one of: {', '.join(choices)}")


def check_settings(config: Any) -> None:
    """A ValueError naming the setting, its value and the fix, for values no decoder can take."""
    method = config.decoder_ode_method
    if method not in TABLEAUS:
        raise ValueError(
            f"decoder_ode_method {method!r} is not a fixed-grid method; choose one of: {', '.join(TABLEAUS)} "
            "(adaptive solvers cannot run a causal decoder: their batch-wide step sizes see future "
            "positions, and step-by-step decoding needs a fixed grid)"
        )
    _choice(config, "ode_coefficients", COEFFICIENT_MODES)
    _choice(config, "ode_field", FIELD_FORMS)
    _choice(config, "ode_scope", SCOPES)
    if config.decoder_ode_corrector == "dlcl":
        raise ValueError(
            "decoder_ode_corrector 'dlcl' (the public code's DLCL corrector) exists for encoders only, "
            "as in ode-seq; use 'multistep' (the paper's corrector) or 'none'"
        )
    _choice(config, "decoder_ode_corrector", DECODER_CORRECTORS)
    if config.decoder_ode_steps < 1:
        raise ValueError(f"decoder_ode_steps must be a positive integer, got {config.decoder_ode_steps}")
    if not config.decoder_ode_interval > 0:
        raise ValueError(f"decoder_ode_interval must be > 0, got {config.decoder_ode_interval}")
    if config.decoder_ode_corrector_history < 0:
        raise ValueError(f"decoder_ode_corrector_history must be >= 0, got {config.decoder_ode_corrector_history}")
    if getattr(config, "add_cross_attention", False):
        raise ValueError(
            "add_cross_attention: an ODE decoder block integrates self-attention and MLP only; "
            "build it with add_cross_attention=False"
        )
    if config.ode_scope == "sublayer" and config.ode_field != "residual-branch":
        raise ValueError(
            f"ode_scope 'sublayer' gives each sublayer its own update, which ode_field {config.ode_field!r} "
            "does not describe: use ode_field 'residual-branch', or ode_scope 'block'"
        )
    if config.ode_scope == "sublayer" and config.decoder_ode_corrector != "none":
        raise ValueError(
            f"decoder_ode_corrector {config.decoder_ode_corrector!r} corrects whole-block steps: use ode_scope 'block'"
        )
