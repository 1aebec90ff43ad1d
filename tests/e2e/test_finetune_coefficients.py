"""`fairseq-train --finetune-from-model` of a vanilla pre-norm Transformer checkpoint into ODE
architectures with trainable output weights: the coefficients and gates the checkpoint lacks start
at their initial values (one INFO line says how many), every other weight is the checkpoint's, and
any other parameter the checkpoint lacks still stops the run."""

from __future__ import annotations

import re
from typing import List

import pytest
import torch

from ode_seq.checkpoint_files import load_checkpoint
from testkit.in_process import run_in_process
from tests.e2e.cli import PRE_NORM_TRANSFORMER, TINY_MODEL, TRANSLATION_TRAINING, run
from tests.e2e.corpus import reversal_data_bin

TRAIN = [*TRANSLATION_TRAINING, "--max-tokens", "1000", "--disable-validation"]
COEFFICIENTS = re.compile(r"\.combiner\.")


@pytest.fixture(scope="module")
def vanilla(tmp_path_factory):
    """(data-bin, checkpoint) of fairseq's own pre-norm `transformer`, 3 updates."""
    raw = tmp_path_factory.mktemp("raw")
    data_bin = reversal_data_bin(raw, {"train": 120, "valid": 10})
    save = raw / "vanilla"
    run_in_process(
        "fairseq-train",
        [
            str(data_bin),
            *PRE_NORM_TRANSFORMER,
            *TRAIN,
            "--lr",
            "0.003",
            "--max-update",
            "3",
            "--save-dir",
            str(save),
        ],
        check=True,
    )
    return data_bin, save / "checkpoint_last.pt"


def finetuning(vanilla, save_dir, arch, *options) -> List[str]:
    """fairseq-train's command line fine-tuning ``vanilla`` into ``arch`` for one update at learning
    rate 0 (weights unchanged)."""
    data, checkpoint = vanilla
    return [
        str(data),
        "--arch",
        arch,
        *TINY_MODEL,
        *options,
        *TRAIN,
        "--lr",
        "0",
        "--max-update",
        "1",
        "--finetune-from-model",
        str(checkpoint),
        "--save-dir",
        str(save_dir),
    ]


@pytest.mark.parametrize(
    "arch, options, initialised",
    [
        ("ode_transformer_rk2_learned_small", [], 2 * 2),  # a gate (W, β) per encoder block
        ("ode_transformer_rk4_encdec_small", ["--ode-coefficients", "free"], 4),  # w per block, both sides
        ("ode_transformer_rk4_small", ["--ode-coefficients", "learned-shared"], 2 * 2),  # one gate, 2 blocks
    ],
)
def test_vanilla_checkpoint_finetunes_into_learned_coefficients_with_its_weights(
    vanilla, tmp_path, arch, options, initialised
):
    out = run_in_process("fairseq-train", finetuning(vanilla, tmp_path, arch, *options), check=True)
    log = out.stdout + out.stderr
    initialised_lines = re.findall(
        r"INFO \| ode_seq\.models\.ode_transformer \| --finetune-from-model: "
        r"the checkpoint lacks (\d+) Runge-Kutta coefficient/gate parameters",
        log,
    )
    assert initialised_lines == [str(initialised)], log[-3000:]
    assert re.search(r"num_updates 1\b", log)
    before = load_checkpoint(str(vanilla[1]))["model"]
    after = load_checkpoint(str(tmp_path / "checkpoint_last.pt"))["model"]
    new = sorted(set(after) - set(before))
    assert len(new) == initialised and all(COEFFICIENTS.search(k) for k in new)
    for name, value in before.items():
        torch.testing.assert_close(after[name], value, rtol=0, atol=0, msg=name)


def test_other_missing_parameters_still_stop_the_finetuning(vanilla, tmp_path):
    """The console script: its message is the traceback's cause, which a process prints."""
    args = finetuning(
        vanilla, tmp_path, "ode_transformer_rk2_learned_small", "--encoder-layer-history", "learnable_dense"
    )
    out = run("fairseq-train", args, check=False)
    assert out.returncode != 0
    assert re.search(r"do not fit the model .* \d+ parameters missing from the checkpoint", out.stderr), out.stderr[
        -3000:
    ]
    assert not (tmp_path / "checkpoint_last.pt").exists()
