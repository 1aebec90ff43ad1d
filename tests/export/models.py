"""Tiny models built as fairseq builds them, with their options, for the export tests."""

import argparse

import torch
from fairseq.models import ARCH_CONFIG_REGISTRY, ARCH_MODEL_REGISTRY

from tests.conftest import TINY


def model_and_args(arch, task, **options):
    """(model in eval mode without dropout, its fairseq options); biases made non-zero."""
    args = argparse.Namespace(**{**TINY, "dropout": 0.0, **options})
    ARCH_CONFIG_REGISTRY[arch](args)
    torch.manual_seed(0)
    model = ARCH_MODEL_REGISTRY[arch].build_model(args, task).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("bias"):
                p.normal_(0, 0.1)
    return model, args


def log_probs(model, batch):
    """fairseq's teacher-forced log-probabilities of a (src, lengths, prev_output_tokens) batch."""
    src, lengths, prev = batch
    with torch.no_grad():
        return model.get_normalized_probs(model(src, lengths, prev), log_probs=True)
