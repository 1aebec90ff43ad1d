"""fairseq criterions of ode-seq."""
from . import jasmin_cross_entropy, trajectory_distillation  # noqa: F401  (registration)
