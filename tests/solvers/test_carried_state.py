"""Solvers hold no state: a predictor–corrector step is a function of the state it carries, passed
in and returned; the DLCL mixes keep no states."""

import pytest
import torch

from ode_seq.solvers import MultistepCorrector, PredictorCorrectorSolver, StateHistory, get_tableau


def field(t, z, step, stage):
    return torch.tanh(z) * (1.0 + t)


def test_a_multistep_step_returns_the_first_stage_values_it_carries_and_changes_nothing_else():
    corrector = MultistepCorrector(history=1)
    solver = PredictorCorrectorSolver(get_tableau("heun"), corrector=corrector)
    y = torch.randn(3, 4, dtype=torch.float64)
    earlier = (torch.randn(3, 4, dtype=torch.float64), torch.randn(3, 4, dtype=torch.float64))
    first, carried = solver.carried_step(field, y, 0, earlier)
    again, _ = solver.carried_step(field, y, 0, earlier)
    assert torch.equal(first, again) and solver.history.values == ()
    k1 = field(0.0, y, 0, 0)
    assert len(carried) == 3 and carried[:2] == earlier and torch.equal(carried[2], k1)
    # y' = y + α F(P) + β_0 k_1 + β_1 k_1^{(n−1)}: the newest earlier value, not the oldest
    prediction = y + 0.5 * (k1 + field(1.0, y + k1, 0, 1))
    alpha, beta = corrector.alpha.detach(), corrector.beta.detach()
    expected = y + alpha * field(1.0, prediction, 0, 2) + beta[0] * k1 + beta[1] * earlier[1]
    torch.testing.assert_close(first, expected.to(first.dtype), rtol=1e-12, atol=1e-12)


def test_a_dlcl_step_returns_the_states_it_carries_and_the_mixes_keep_none():
    states = StateHistory(steps=2, embed_dim=4).double()
    solver = PredictorCorrectorSolver(get_tableau("euler"), states=states)
    y = torch.randn(3, 4, dtype=torch.float64)
    with torch.no_grad():
        y1, carried = solver.carried_step(field, y, 0, (y,))
        # h_1 = LN_1(P), x̃ = ½ y + ½ h_1, then h_1 ← LN'_1(F(x̃)) and y_1 = ½ y + ½ h_1 (averages)
        x = 0.5 * y + 0.5 * states.prediction.layer_norms[0](y + field(0.0, y, 0, 0))
        h1 = states.corrected.layer_norms[0](field(1.0, x, 0, 1))
    assert len(carried) == 2 and carried[0] is y
    torch.testing.assert_close(carried[1], h1, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(y1, 0.5 * y + 0.5 * h1, rtol=1e-12, atol=1e-12)
    kept = [
        name
        for module in states.modules()
        for name, value in vars(module).items()
        if isinstance(value, torch.Tensor) or (isinstance(value, (list, tuple)) and value and torch.is_tensor(value[0]))
    ]
    assert kept == []  # tensors only as parameters and buffers


def test_a_predictor_corrector_step_without_the_carried_state_is_refused():
    solver = PredictorCorrectorSolver(get_tableau("heun"), corrector=MultistepCorrector(history=0))
    with pytest.raises(TypeError, match="call carried_step with it"):
        solver.step(field, torch.ones(2), 0)
