"""fairseq models and architectures of ode-seq."""
from . import ode_transformer, nonautonomous, architectures  # noqa: F401  (registration)
