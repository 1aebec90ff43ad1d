"""Shared pieces of the language-model tests (their corpus: the fixture ``lm_data`` of
tests/conftest.py): tiny LMs, fairseq-train's command line."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, Sequence

import pytest

from tests.conftest import TinyTask, build_sized_model, fixed_torch_threads
from tests.e2e.cli import PLAIN_RUN

fixed_threads = pytest.fixture(autouse=True)(fixed_torch_threads)

TINY_LM = dict(decoder_embed_dim=32, decoder_ffn_embed_dim=64, decoder_attention_heads=4, decoder_layers=2)
TINY_TIME = dict(time_features=8, time_hidden_dim=16, time_embed_dim=4)


def build_lm(arch: str, seed: int = 0, vocab: int = 30, **overrides: Any):
    """fairseq model ``arch`` at tiny sizes (``overrides`` win), in fp32 on the CPU."""
    return build_sized_model(arch, TinyTask(vocab), seed, **{**TINY_LM, **overrides})


def options_command_line(options: Dict[str, Any]) -> List[str]:
    """Model option values as command-line arguments (``True`` as a bare flag)."""
    args: List[str] = []
    for key, value in options.items():
        flag = f"--{key.replace('_', '-')}"
        args += [flag] if value is True else [flag, str(value)]
    return args


def lm_training_args(data_bin: Path, arch: str, options: Dict[str, Any], extra: Sequence[str] = ()) -> List[str]:
    """fairseq-train's command line for a tiny LM of ``arch`` on ``data_bin``."""
    return [
        str(data_bin),
        "--task",
        "language_modeling",
        "--user-dir",
        "user_dir",
        "--arch",
        arch,
        *options_command_line({**TINY_LM, **options}),
        "--tokens-per-sample",
        "32",
        "--max-tokens",
        "256",
        "--optimizer",
        "adam",
        "--lr",
        "0.001",
        *PLAIN_RUN,
        *extra,
    ]
