"""ode-seq's fairseq plugin: ``--user-dir user_dir`` registers models, architectures, criterions."""
from . import checkpoint_safety, models  # noqa: F401  (registration)

checkpoint_safety.allow_fairseq_checkpoint_types()
