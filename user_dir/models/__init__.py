"""fairseq models and architectures of ode-seq."""
from . import ode_transformer, nonautonomous, architectures, stable_ode_transformer  # noqa: F401  (registration)
