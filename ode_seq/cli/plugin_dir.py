"""The fairseq plugin directory of the installed ode-seq: the ``user_dir`` package's folder, for
``fairseq-train --user-dir "$(ode-seq user-dir)"`` from any directory."""

from __future__ import annotations

import argparse
import importlib.util
from typing import List, Optional


def plugin_directory() -> str:
    """The folder of the importable ``user_dir`` package (found without importing fairseq)."""
    spec = importlib.util.find_spec("user_dir")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(
            "the user_dir package of ode-seq is not installed in this Python: "
            "run `pip install --no-deps -e .` in the ode-seq checkout (or bash scripts/setup.sh)"
        )
    return spec.submodule_search_locations[0]


def main(argv: Optional[List[str]] = None, prog: str = "python -m ode_seq.cli.plugin_dir") -> int:
    argparse.ArgumentParser(prog=prog, description=__doc__).parse_args(argv)
    print(plugin_directory())
    return 0
