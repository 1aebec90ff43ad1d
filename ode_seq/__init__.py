"""ode-seq: ODE-inspired Transformers for sequence generation on fairseq.

:mod:`.solvers` and :mod:`.fields` (no fairseq) ← :mod:`.layers` (blocks on fairseq's layers) ←
:mod:`.models` (what ``--user-dir user_dir`` registers) ← :mod:`.cli`; beside them
:mod:`.fairseq_fixes`, :mod:`.analysis` and :mod:`.metrics`.
"""

__version__ = "0.1.0"
