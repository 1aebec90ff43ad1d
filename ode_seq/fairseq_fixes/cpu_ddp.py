"""Data-parallel training of CPU modules (gloo)."""

from __future__ import annotations

from torch.nn.parallel import DistributedDataParallel

from .fix import ReplacementFix


class DeviceAwareDistributedDataParallel(DistributedDataParallel):
    """torch's DDP given ``device_ids`` only for modules on an accelerator (torch refuses them
    for CPU modules)."""

    def __init__(self, module, device_ids=None, output_device=None, **kwargs) -> None:
        if next(module.parameters()).device.type == "cpu":
            device_ids = output_device = None
        super().__init__(module, device_ids=device_ids, output_device=output_device, **kwargs)


class CPUDistributedDataParallel(ReplacementFix):
    """fairseq's ``DistributedFairseqModel`` gives torch's DDP ``device_ids=[device_id]`` even for
    CPU modules, which DDP refuses, so ``--cpu`` data-parallel training stops at start-up. The
    fix: fairseq builds a DDP subclass that leaves ``device_ids`` out for CPU modules."""

    name = "cpu_ddp"
    issues = ("facebookresearch/fairseq#2879",)
    patches = ("fairseq.models.distributed_fairseq_model.DistributedDataParallel",)
    replacement = DeviceAwareDistributedDataParallel
    changes_working_runs = False
