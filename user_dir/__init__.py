"""ode-seq's fairseq plugin: ``--user-dir user_dir`` registers models, architectures, criterions."""
import os
import sys

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

from . import fairseq_fixes, models, criterions  # noqa: E402,F401  (registration)

fairseq_fixes.apply()
