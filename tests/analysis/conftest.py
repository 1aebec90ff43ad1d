"""Analysis tests run torch on one thread (or ``ODE_SEQ_TEST_THREADS``): their matrices are tiny,
and thread hand-offs on a busy machine would cost more than the arithmetic."""

from __future__ import annotations

import pytest

from tests.conftest import fixed_torch_threads

fixed_threads = pytest.fixture(autouse=True)(fixed_torch_threads)
