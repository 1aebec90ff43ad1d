"""Analysis tests run torch on one thread: their matrices are tiny, and thread hand-offs on a
busy machine would cost more than the arithmetic."""

from __future__ import annotations

import pytest

from tests.conftest import one_torch_thread

single_torch_thread = pytest.fixture(autouse=True)(one_torch_thread)
