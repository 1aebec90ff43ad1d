"""fairseq criterions of ode-seq: label-smoothed CE with the JaSMin penalty, and
teacher-trajectory distillation."""

from . import jasmin_cross_entropy, trajectory_distillation  # noqa: F401  (registration)
