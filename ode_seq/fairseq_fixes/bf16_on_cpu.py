"""--bf16 --cpu without fairseq's TPU code path."""
from __future__ import annotations

import functools
from typing import Callable

from fairseq import options

from .fix import FairseqFix


def keeping_cpu(parse_args_and_arch: Callable) -> Callable:
    """``parse_args_and_arch`` that switches ``tpu`` back off when ``--bf16`` is given with ``--cpu``."""

    @functools.wraps(parse_args_and_arch)
    def parse(*args, **kwargs):
        parsed = parse_args_and_arch(*args, **kwargs)
        namespace = parsed[0] if isinstance(parsed, tuple) else parsed
        if getattr(namespace, "bf16", False) and getattr(namespace, "cpu", False):
            namespace.tpu = False
        return parsed

    return parse


class Bf16OnCPU(FairseqFix):
    """fairseq's ``options.parse_args_and_arch`` sets ``tpu = True`` whenever ``--bf16`` is given,
    so ``fairseq-train --bf16 --cpu`` stops at ``utils.get_tpu_device()``. The fix leaves ``tpu``
    off on CPU, where fairseq's bf16 Trainer path (model in bf16, no loss scaler) then runs."""

    name = "bf16_on_cpu"
    issues = ("facebookresearch/fairseq#4696",)

    def apply(self) -> None:
        options.parse_args_and_arch = keeping_cpu(options.parse_args_and_arch)
