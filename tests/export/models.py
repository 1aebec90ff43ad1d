"""Tiny models built as fairseq builds them, with their options, for the export tests."""

import torch

from ode_seq.models.by_name import model_and_options
from tests.conftest import TINY


def model_and_args(arch, task, **options):
    """(model in eval mode without dropout, its fairseq options); biases made non-zero."""
    model, args = model_and_options(arch, task, **{**TINY, "dropout": 0.0, **options})
    model.eval()
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
