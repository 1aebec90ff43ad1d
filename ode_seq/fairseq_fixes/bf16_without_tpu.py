"""--bf16 on CPU and CUDA without fairseq's TPU code path."""

from __future__ import annotations

import functools
import sys
from typing import Callable

from fairseq import options

from .fix import FairseqFix


def tpu_only_when_asked(parse_args_and_arch: Callable) -> Callable:
    """``parse_args_and_arch`` that leaves ``tpu`` as the command line set it when ``--bf16``
    switched it on: on only with ``--tpu``."""

    @functools.wraps(parse_args_and_arch)
    def parse(parser, input_args=None, *args, **kwargs):
        parsed = parse_args_and_arch(parser, input_args, *args, **kwargs)
        namespace = parsed[0] if isinstance(parsed, tuple) else parsed
        given = sys.argv[1:] if input_args is None else input_args
        if getattr(namespace, "bf16", False) and "--tpu" not in given:
            namespace.tpu = False
        return parsed

    return parse


class Bf16WithoutTPU(FairseqFix):
    """fairseq's ``options.parse_args_and_arch`` sets ``tpu = True`` whenever ``--bf16`` is given,
    so ``fairseq-train --bf16`` stops at ``utils.get_tpu_device()`` on a CPU and on a CUDA GPU
    alike. The fix leaves ``tpu`` off unless ``--tpu`` is given, and fairseq's bf16 Trainer path
    (model in bf16, fp32 master weights, no loss scaler) runs on the CPU or the GPU."""

    name = "bf16_without_tpu"
    issues = ("facebookresearch/fairseq#4696",)
    patches = ("fairseq.options.parse_args_and_arch",)
    changes_working_runs = False

    def apply(self) -> None:
        options.parse_args_and_arch = tpu_only_when_asked(options.parse_args_and_arch)
