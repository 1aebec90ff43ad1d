"""A CTranslate2 model from a plain fairseq ``transformer`` or ``transformer_lm`` checkpoint, by
CTranslate2's own fairseq converter (a ``Translator`` or a ``Generator`` model).

The converter reads the model options by attribute from ``checkpoint["cfg"]["model"]`` as it
lies in the file, i.e. it expects the ``argparse.Namespace`` fairseq's trainer writes; and it
loads with torch's ``weights_only`` unpickler. The checkpoint handed to it therefore carries a
Namespace, and the conversion runs with ``argparse.Namespace`` allow-listed for the process, as
the plugin's own checkpoint loading does (safe loading stays on; a ``safe_globals`` context would
remove it again on exit). The plain checkpoint :mod:`ode_seq.cli.export` writes for fairseq keeps
a dict instead, so that fairseq-generate loads it without the plugin (torch ≥ 2.6 refuses a
Namespace there).
"""

from __future__ import annotations

import argparse
import os
from typing import Any, Dict

from ode_seq.checkpoint_files import allow_fairseq_checkpoint_types, save_checkpoint

from .plain import PlainTransformer


def converter_options(plain: PlainTransformer, task: Dict[str, Any]) -> Dict[str, Any]:
    """The options the converter reads from ``cfg.model``: the model's; for a language model also
    ``arch`` and the task's options, from which it sets up fairseq's task."""
    if plain.config["_name"] != "transformer_lm":
        return plain.config
    return {**task, "task": task["_name"], **plain.config, "arch": "transformer_lm"}


def convert(plain: PlainTransformer, state: Dict[str, Any], data: str, work_dir: str, output: str) -> None:
    """Write the CTranslate2 model of ``plain`` into ``output`` (a directory that must not
    exist); ``state``: the rest of the fairseq checkpoint; ``data``: the directory of its
    dictionaries; ``work_dir``: where the intermediate checkpoint goes."""
    from ctranslate2.converters import FairseqConverter

    checkpoint = os.path.join(work_dir, "transformer.pt")
    task = state["cfg"]["task"]
    save_checkpoint(
        {
            **state,
            "model": plain.state_dict,
            "args": None,
            "cfg": {**state["cfg"], "model": argparse.Namespace(**converter_options(plain, task))},
        },
        checkpoint,
    )
    converter = FairseqConverter(
        checkpoint, data, source_lang=task.get("source_lang"), target_lang=task.get("target_lang")
    )
    allow_fairseq_checkpoint_types()  # process-wide, as the plugin's loading does
    converter.convert(output)
