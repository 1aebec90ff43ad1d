"""``--ode-check-finite`` through fairseq-train: a non-finite stage output stops training with
the block, step, stage and method that produced it (block-level behaviour, fp16/bf16 warnings
and both stacks are unit-tested in tests/test_encoder_blocks.py)."""

from __future__ import annotations

import pytest
import torch

from ode_seq.checkpoint_files import check_finite_parameters, load_checkpoint
from tests.e2e.cli import run
from tests.reliability.corpus import OPTIMISATION, QUIET_CPU, RK4_LEARNED, final_error


def test_fairseq_train_reports_the_block_stage_and_method_of_a_non_finite_value(data_bin, reference_run, tmp_path):
    state = load_checkpoint(str(reference_run[0] / "checkpoint_last.pt"))
    state["model"]["encoder.layers.1.fc2.bias"][0] = float("inf")  # F of encoder block 1 is inf
    poisoned = tmp_path / "poisoned.pt"
    torch.save(state, poisoned)
    result = run(
        "fairseq-train",
        [
            str(data_bin),
            *RK4_LEARNED,
            *OPTIMISATION,
            *QUIET_CPU,
            "--ode-check-finite",
            "--restore-file",
            str(poisoned),
            "--reset-optimizer",
            "--max-update",
            "1",
            "--disable-validation",
            "--save-dir",
            str(tmp_path / "ckpt"),
        ],
        check=False,
    )
    assert result.returncode != 0
    assert final_error(result.stderr).startswith(
        "FloatingPointError: non-finite value in encoder block 1, step 0, stage 1 of method rk4 (dtype torch.float32)"
    )


def test_a_non_finite_weight_is_refused_but_fairseqs_uninitialised_placeholder_buffer_is_not():
    # AdaptiveInput's ``_float_tensor`` is torch.FloatTensor(1): uninitialised memory, at times inf
    weights = {"decoder.embed_tokens._float_tensor": torch.tensor([float("inf")]), "fc1.weight": torch.ones(3)}
    check_finite_parameters("run.pt", weights)
    weights["fc1.weight"][1] = float("nan")
    with pytest.raises(ValueError, match="run.pt holds non-finite parameters: 1 of 3 values of fc1.weight"):
        check_finite_parameters("run.pt", weights)
