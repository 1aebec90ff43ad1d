"""The custom code of an exported Hugging Face folder (``trust_remote_code=True``): the model's
files from :mod:`.remote_code` and, copied unchanged by :mod:`ode_seq.code_folder`, the files of
ode-seq they import (``CARRIED``: the builder of a stack's solvers with what it imports, the solver
core with PCformer's predictor–corrector steps and DLCL, the layer field, and the per-evaluation
key/value caches of :mod:`ode_seq.transformers`, which import only torch, transformers and each
other)."""

from __future__ import annotations

import os
import shutil
from typing import Any, Dict, Sequence, Tuple

from ode_seq.code_folder import PACKAGE, code_files, copy_code
from ode_seq.solvers import FixedGridSolver, PredictorCorrectorSolver

REMOTE_CODE = os.path.join(os.path.dirname(__file__), "remote_code")
CARRIED = tuple(
    code_files(
        [
            os.path.join(PACKAGE, "solvers", "stack_solvers.py"),
            os.path.join(PACKAGE, "fields.py"),
            os.path.join(PACKAGE, "transformers", "stage_caches.py"),
        ]
    ).values()
)
SHARED_CODE = ("ode_layers.py",)


def write_code(output: str, names: Sequence[str], auto_map: Dict[str, str]) -> Tuple[type, type]:
    """Create the folder ``output`` with the remote-code files ``names`` (of :mod:`.remote_code`),
    the shared ones and ``CARRIED``; the (config, model) classes ``auto_map`` names, loaded from
    the folder as transformers will load them."""
    from transformers.dynamic_module_utils import get_class_from_dynamic_module

    os.makedirs(output)
    for name in (*names, *SHARED_CODE):
        shutil.copyfile(os.path.join(REMOTE_CODE, name), os.path.join(output, name))
    copy_code(CARRIED, output)
    config_class, model_class = (get_class_from_dynamic_module(reference, output) for reference in auto_map.values())
    return config_class, model_class


def corrector_options(solver: FixedGridSolver, side: str) -> Dict[str, Any]:
    """The config's ``{side}_ode_corrector`` (none, multistep, dlcl) and, for multistep, the
    history length m of the corrector's m + 1 first-stage values."""
    if not isinstance(solver, PredictorCorrectorSolver):
        return {f"{side}_ode_corrector": "none"}
    options = {f"{side}_ode_corrector": solver.form}
    if solver.corrector is not None:
        options[f"{side}_ode_corrector_history"] = solver.corrector.length - 1
    return options
