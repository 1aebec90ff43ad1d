"""--fp16 --cpu with fairseq's flat fp32 master copy of the parameters."""

from __future__ import annotations

import torch
from fairseq import optim

from .fix import ReplacementFix


class CPUFlatFP16Optimizer(optim.FP16Optimizer):
    """fairseq's FP16Optimizer whose flat fp32 master copy may live on the CPU."""

    @classmethod
    def build_fp32_params(cls, args, params, flatten=True):
        if not (flatten and params and params[0].device.type == "cpu"):
            return super().build_fp32_params(args, params, flatten)
        # fairseq keys the flat copy by device index, which is None for CPU tensors
        flat = torch.nn.Parameter(torch.cat([p.data.float().reshape(-1) for p in params]))
        flat.grad = torch.zeros_like(flat.data)
        return {None: flat}


class FP16FlatGradsOnCPU(ReplacementFix):
    """fairseq's ``FP16Optimizer.build_fp32_params`` puts the flat fp32 copy of the parameters on
    ``torch.cuda.current_device()``, so ``fairseq-train --fp16 --cpu`` stops with "Torch not
    compiled with CUDA enabled" unless ``--fp16-no-flatten-grads`` is given. The fix: the trainer
    builds a subclass that keeps the flat copy on the CPU for CPU parameters."""

    name = "fp16_on_cpu"
    issues = ("facebookresearch/fairseq#5296",)
    patches = ("fairseq.optim.FP16Optimizer",)
    replacement = CPUFlatFP16Optimizer
    changes_working_runs = False
