"""ode-seq's fairseq plugin: ``--user-dir user_dir`` registers the models, architectures and
criterions of :mod:`ode_seq.models` and applies :mod:`ode_seq.fairseq_fixes`."""

import os
import sys

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

import ode_seq.models  # noqa: E402,F401  (registration)
from ode_seq.fairseq_fixes import apply_fixes  # noqa: E402

apply_fixes()
