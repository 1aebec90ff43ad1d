"""Fixtures shared by the stable-field and distillation tests: torch on one thread (or
``ODE_SEQ_TEST_THREADS``): tiny models gain nothing from intra-op threads, and on a busy machine
OpenMP's spinning barriers make a two-thread forward pass up to ~100x slower."""

import pytest

from tests.conftest import fixed_torch_threads

fixed_threads = pytest.fixture(autouse=True)(fixed_torch_threads)
