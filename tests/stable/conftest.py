"""Fixtures shared by the stable-field and distillation tests."""

import pytest
import torch


@pytest.fixture(autouse=True)
def one_torch_thread():
    """Run single-threaded: tiny models gain nothing from intra-op threads, and on a busy machine
    OpenMP's spinning barriers make a two-thread forward pass up to ~100x slower."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
