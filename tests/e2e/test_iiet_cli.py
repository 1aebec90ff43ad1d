"""IIET through fairseq's CLIs: trained with r iterations, decoded with fewer (``--model-overrides``)."""

import re

import pytest
import torch
from fairseq import checkpoint_utils

from ode_seq.checkpoint_files import load_checkpoint
from testkit.in_process import run_in_process
from tests.e2e.cli import TINY_MODEL, TRAIN, logged_updates, subset_args
from tests.e2e.corpus import CLI_SIZES, reversal_data_bin
from tests.numerics import LayerEvaluations

TRAINED = 3
BLOCKS = 2 + 2  # TINY_MODEL: 2 encoder and 2 decoder blocks, one step each


def iterations_overrides(iterations: int) -> dict:
    """The --model-overrides running both stacks with r iterations (r = 0: the residual layer, euler)."""
    method = f"iie{iterations}" if iterations else "euler"
    return {"encoder_ode_method": method, "decoder_ode_method": method}


@pytest.fixture(scope="module")
def iiet(tmp_path_factory):
    """(data-bin, checkpoint of an IIET model trained with 3 iterations in both stacks)."""
    root = tmp_path_factory.mktemp("iiet")
    data_bin = reversal_data_bin(root, CLI_SIZES)
    run_in_process(
        "fairseq-train",
        [
            str(data_bin),
            "--arch",
            "ode_transformer_rk4_encdec_small",
            *TINY_MODEL,
            "--encoder-ode-method",
            f"iie{TRAINED}",
            "--decoder-ode-method",
            f"iie{TRAINED}",
            *TRAIN,
            "--max-update",
            "10",
            "--no-epoch-checkpoints",
            "--disable-validation",
            "--save-dir",
            str(root / "teacher"),
        ],
        check=True,
    )
    return data_bin, root / "teacher" / "checkpoint_last.pt"


def generate(data_bin, checkpoint, *options):
    out = run_in_process(
        "fairseq-generate",
        subset_args(data_bin, checkpoint, "valid", "--beam", "4", "--max-tokens", "1000", *options),
        check=True,
    )
    return re.findall(r"^H-\d+\t", out.stdout, re.M)


@pytest.mark.parametrize("iterations", [1, 0])
def test_a_checkpoint_trained_with_r_iterations_decodes_with_fewer_and_evaluates_less(iiet, iterations):
    data_bin, checkpoint = iiet
    assert len(generate(data_bin, checkpoint, "--model-overrides", str(iterations_overrides(iterations)))) == 30
    counts = {}
    for r in (TRAINED, iterations):
        # What fairseq-generate's loading does with --model-overrides.
        (model,), _ = checkpoint_utils.load_model_ensemble(
            [str(checkpoint)], arg_overrides=iterations_overrides(r) | {"data": str(data_bin)}
        )
        src = torch.tensor([[5, 6, 7, 2]])
        with LayerEvaluations(model.eval()) as evaluations, torch.no_grad():
            model(src, torch.tensor([4]), torch.tensor([[2, 5, 6, 7]]))
        counts[r] = evaluations.count
    assert counts == {TRAINED: (TRAINED + 1) * BLOCKS, iterations: (iterations + 1) * BLOCKS}


DISTILLATION_UPDATES = 8


@pytest.fixture(scope="module")
def distilled(iiet, tmp_path_factory):
    """(student save dir, its training log): the IIET model distilled into 1 iteration."""
    data_bin, teacher = iiet
    student_dir = tmp_path_factory.mktemp("student")
    out = run_in_process(
        "fairseq-train",
        [
            str(data_bin),
            "--arch",
            "ode_transformer_rk4_encdec_small",
            *TINY_MODEL,
            "--encoder-ode-method",
            "iie1",
            "--decoder-ode-method",
            "iie1",
            *TRAIN,
            "--dropout",
            "0",
            "--lr",
            "0.001",
            "--finetune-from-model",
            str(teacher),
            "--criterion",
            "ode_trajectory_distillation",
            "--teacher-path",
            str(teacher),
            "--control-times",
            "uniform",
            "--jasmin-weight",
            "0",
            "--ce-start-update",
            "100",
            *logged_updates(DISTILLATION_UPDATES, student_dir),
        ],
        check=True,
    )
    return student_dir, out.stdout + out.stderr


def test_distilling_into_fewer_iterations_lowers_the_trajectory_loss_through_fairseq_train(distilled):
    losses = [float(x) for x in re.findall(r"train_inner .*?trajectory=([\d.]+)", distilled[1])]
    assert len(losses) == DISTILLATION_UPDATES
    assert 0 < losses[-1] < losses[0]


def test_the_distilled_student_decodes_with_its_iterations(iiet, distilled):
    data_bin, _ = iiet
    checkpoint = distilled[0] / "checkpoint_last.pt"
    assert load_checkpoint(str(checkpoint))["cfg"]["model"].decoder_ode_method == "iie1"
    assert len(generate(data_bin, checkpoint)) == 30
