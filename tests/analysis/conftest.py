"""Analysis tests run torch on one thread: their matrices are tiny, and thread hand-offs on a
busy machine would cost more than the arithmetic."""
from __future__ import annotations

import pytest
import torch


@pytest.fixture(autouse=True)
def single_torch_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
