"""Checkpoints written by earlier code (tests/fixtures) load with fairseq's own loader and give
the log-probabilities recorded when they were written, up to float32 rounding (tests/numerics.py)."""

import os

import pytest
import torch
from fairseq import checkpoint_utils

import user_dir  # noqa: F401  (registers the models, allow-lists fairseq's checkpoint types)
from tests.conftest import fixed_torch_threads
from tests.fixtures.make_fixtures import CHECKPOINTS, FIXTURES, HERE, LOGPROBS, batch
from tests.numerics import assert_computes

fixed_threads = pytest.fixture(autouse=True)(fixed_torch_threads)


def test_every_fixture_has_recorded_log_probabilities():
    recorded = torch.load(LOGPROBS, weights_only=True)
    assert sorted(recorded) == sorted(FIXTURES)
    assert sorted(os.listdir(CHECKPOINTS)) == sorted(f"{name}.pt" for name in FIXTURES)


def _load(name):
    (model,), _, task = checkpoint_utils.load_model_ensemble_and_task(
        [os.path.join(CHECKPOINTS, f"{name}.pt")], arg_overrides={"data": HERE}
    )
    return model.eval(), task


def _assert_gives_recorded_log_probabilities(model, task, name):
    def log_probs():
        with torch.no_grad():
            return model.get_normalized_probs(model(**batch(task.source_dictionary)), log_probs=True)

    assert_computes(model, log_probs, torch.load(LOGPROBS, weights_only=True)[name])


@pytest.mark.numerics
@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_fixture_checkpoint_loads_and_gives_recorded_log_probabilities(name):
    _assert_gives_recorded_log_probabilities(*_load(name), name)


@pytest.mark.numerics
@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_a_weight_changed_by_1e_4_no_longer_gives_the_recorded_log_probabilities(name):
    # W_out[v, j] + 1e-4 moves the logit of word v by 1e-4·h_j (h: the decoder's output state, |h_j| ~ 1)
    # at every target position: a change the size of the tolerance, made at the model's output.
    model, task = _load(name)
    weight = model.decoder.output_projection.weight
    with torch.no_grad():
        weight.view(-1)[weight.numel() // 2] += 1e-4
    with pytest.raises(AssertionError, match="Tensor-likes are not close"):
        _assert_gives_recorded_log_probabilities(model, task, name)
