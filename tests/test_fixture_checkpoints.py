"""Checkpoints written by earlier code (tests/fixtures) load with fairseq's own loader and give
the log-probabilities recorded when they were written."""

import os

import pytest
import torch
from fairseq import checkpoint_utils

import user_dir  # noqa: F401  (registers the models, allow-lists fairseq's checkpoint types)
from tests.conftest import one_torch_thread
from tests.fixtures.make_fixtures import CHECKPOINTS, FIXTURES, HERE, LOGPROBS, batch

single_torch_thread = pytest.fixture(autouse=True)(one_torch_thread)


def test_every_fixture_has_recorded_log_probabilities():
    recorded = torch.load(LOGPROBS, weights_only=True)
    assert sorted(recorded) == sorted(FIXTURES)
    assert sorted(os.listdir(CHECKPOINTS)) == sorted(f"{name}.pt" for name in FIXTURES)


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_fixture_checkpoint_loads_and_gives_recorded_log_probabilities(name):
    (model,), _, task = checkpoint_utils.load_model_ensemble_and_task(
        [os.path.join(CHECKPOINTS, f"{name}.pt")], arg_overrides={"data": HERE}
    )
    model.eval()
    with torch.no_grad():
        out = model(**batch(task.source_dictionary))
        log_probs = model.get_normalized_probs(out, log_probs=True)
    expected = torch.load(LOGPROBS, weights_only=True)[name]
    torch.testing.assert_close(log_probs, expected, atol=1e-6, rtol=0)
