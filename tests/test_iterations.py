"""IIET's iteration count as a knob: a model trained with r iterations (``iie{r}``) runs with
r' < r (``iie{r'}``, r' = 0 being ``euler``) on the same parameters, as ``--model-overrides``
of ``--*-ode-method`` does when fairseq loads a checkpoint."""

import pytest
import torch

from tests.conftest import TinyTask, build_model, random_batch
from tests.lm.conftest import build_lm
from tests.lm.test_lm_models import assert_incremental_equals_full
from tests.numerics import LayerEvaluations, assert_incremental_decoding_equals_full_forward

TRAINED = 3


def method(iterations: int) -> str:
    """IIET with r iterations: r + 1 evaluations per step; r = 0 is the residual layer."""
    return f"iie{iterations}" if iterations else "euler"


def iiet_model(task, iterations: int, coefficients: str):
    return build_model(
        "ode_transformer_rk4_encdec",
        task,
        encoder_ode_method=method(iterations),
        decoder_ode_method=method(iterations),
        ode_coefficients=coefficients,
        dropout=0.0,
    )


@pytest.mark.numerics
@pytest.mark.parametrize(
    "coefficients, iterations",
    # ema weights the stages of multi-stage methods; Euler (r' = 0) has one (refused when built).
    [("fixed", 0), ("fixed", 1), ("fixed", 2), ("ema", 1), ("ema", 2)],
)
def test_fewer_iterations_load_the_trained_parameters_decode_exactly_and_evaluate_less(coefficients, iterations):
    task = TinyTask()
    trained = iiet_model(task, TRAINED, coefficients)
    reduced = iiet_model(task, iterations, coefficients)
    reduced.load_state_dict(trained.state_dict(), strict=True)
    for name, p in reduced.named_parameters():
        assert torch.equal(p, trained.state_dict()[name]), name
    reduced = reduced.double().eval()
    assert_incremental_decoding_equals_full_forward(reduced, task, [6, 3, 8, 5])

    batch = random_batch(task, [6, 3, 8, 5])
    counts = {}
    for r, model in ((TRAINED, trained.eval()), (iterations, reduced)):
        with LayerEvaluations(model) as evaluations, torch.no_grad():
            model(*batch)
        counts[r] = evaluations.count
    blocks = 2 + 2  # TINY: 2 encoder and 2 decoder blocks, one step each
    assert counts == {TRAINED: (TRAINED + 1) * blocks, iterations: (iterations + 1) * blocks}


@pytest.mark.parametrize("coefficients", ["free", "free-ones", "learned", "learned-shared"])
def test_per_stage_weights_refuse_another_iteration_count_naming_the_fix(coefficients):
    task = TinyTask()
    trained = iiet_model(task, TRAINED, coefficients)
    reduced = iiet_model(task, 1, coefficients)
    with pytest.raises(RuntimeError, match=r"trained for another number of stages .* --ode-coefficients fixed or ema"):
        reduced.load_state_dict(trained.state_dict(), strict=True)


@pytest.mark.numerics
def test_a_language_model_trained_with_r_iterations_decodes_exactly_with_fewer():
    trained = build_lm("ode_transformer_lm_rk4", decoder_ode_method=method(TRAINED))
    reduced = build_lm("ode_transformer_lm_rk4", decoder_ode_method=method(1))
    reduced.load_state_dict(trained.state_dict(), strict=True)
    tokens = torch.tensor([[5, 6, 7, 8]])
    with LayerEvaluations(reduced) as evaluations, torch.no_grad():
        reduced.eval()(tokens)
    assert evaluations.count == 2 * len(reduced.decoder.layers)
    assert_incremental_equals_full(reduced)
