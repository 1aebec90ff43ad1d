"""Butcher tableaus are valid and every method converges at its order."""

import math

import numpy as np
import pytest
import torch

from ode_seq.solvers import TABLEAUS, ButcherTableau, FixedGridSolver, get_tableau
from tests.numerics import assert_equal_up_to_rounding

EXPECTED_ORDERS = {
    "euler": 1,
    "midpoint": 2,
    "heun": 2,
    "ralston": 2,
    "rk3": 3,
    "rk4": 4,
    "rk4_38": 4,
    "iie1": 1,
    "iie2": 1,
    "iie3": 1,
    "iie4": 1,
}


def test_every_tableau_is_consistent_and_b_sums_to_one():
    assert set(TABLEAUS) == set(EXPECTED_ORDERS)
    for t in TABLEAUS.values():
        assert math.isclose(sum(t.b), 1.0)
        for i, row in enumerate(t.a):
            assert len(row) == i and math.isclose(sum(row), t.c[i], abs_tol=1e-12)


def _solve(field, y0, t1: float, steps: int, tableau: ButcherTableau) -> torch.Tensor:
    """y(t1) of dy/dt = field(t, y), y(0) = y0."""
    solver = FixedGridSolver(tableau, steps=steps, interval=t1)
    return solver.solve(lambda t, y, step, stage: field(t, y), y0)


def _observed_order(name: str, field, exact: float, t1: float) -> float:
    tableau = get_tableau(name)
    steps = np.array([16, 32, 64, 128])
    y0 = torch.tensor(1.0, dtype=torch.float64)
    errors = [abs(_solve(field, y0, t1, int(n), tableau).item() - exact) for n in steps]
    return -np.polyfit(np.log(steps), np.log(errors), 1)[0]


@pytest.mark.parametrize("name", sorted(EXPECTED_ORDERS))
def test_global_error_on_linear_ode_falls_at_method_order(name):
    lam = -1.3
    slope = _observed_order(name, lambda t, y: lam * y, math.exp(lam), 1.0)
    assert abs(slope - EXPECTED_ORDERS[name]) < 0.15, slope


@pytest.mark.parametrize("name", sorted(EXPECTED_ORDERS))
def test_global_error_on_time_dependent_ode_falls_at_method_order(name):
    # dy/dt = -y + t^2 y^2 / 4 + cos(2t): nonlinear and non-autonomous, so wrong stage times c show.
    field = lambda t, y: -y + t * t * y * y / 4 + math.cos(2 * t)  # noqa: E731
    y0 = torch.tensor(1.0, dtype=torch.float64)
    reference = _solve(field, y0, 1.0, 8192, get_tableau("rk4")).item()
    slope = _observed_order(name, field, reference, 1.0)
    assert abs(slope - EXPECTED_ORDERS[name]) < 0.2, slope


@pytest.mark.numerics
def test_rk3_uses_kutta_stage_not_public_code_bug():
    # F(y) = y^2 separates y - k1 + 2 k2 (Kutta) from y + k2 (the public code's bug).
    y = torch.tensor(0.5, dtype=torch.float64)
    f = lambda z: z * z  # noqa: E731
    k1 = f(y)
    k2 = f(y + k1 / 2)
    k3 = f(y - k1 + 2 * k2)  # noqa: E702
    expected = y + (k1 + 4 * k2 + k3) / 6
    step = FixedGridSolver(get_tableau("rk3")).step(lambda t, z, n, i: f(z), y, 0)
    assert_equal_up_to_rounding(step, expected, 3)


@pytest.mark.numerics
@pytest.mark.parametrize("r", [1, 2, 3, 4])
@pytest.mark.parametrize("h", [1.0, 0.3])
def test_iterated_implicit_euler_is_r_fixed_point_iterations_of_implicit_euler(r, h):
    # IIET: x(0) = y + h F(y), x(i) = y + h F(x(i-1)), y' = x(r); F nonlinear so every stage shows.
    y = torch.tensor([0.5, -0.2], dtype=torch.float64)
    f = lambda z: torch.sin(z) + z * z  # noqa: E731
    x = y + h * f(y)
    for _ in range(r):
        x = y + h * f(x)
    solver = FixedGridSolver(get_tableau(f"iie{r}"), steps=1, interval=h)
    step = solver.step(lambda t, z, n, i: f(z), y, 0)
    assert_equal_up_to_rounding(step, x, r + 1)
    assert get_tableau(f"iie{r}").stages == r + 1


@pytest.mark.numerics
@pytest.mark.parametrize("r", [1, 2, 4])
def test_iterated_implicit_euler_on_linear_ode_is_truncated_implicit_euler_series(r):
    # One step on y' = λy multiplies y by Σ_{m=0}^{r+1} (hλ)^m, the start of 1/(1 − hλ).
    z = -0.4 * 0.25
    solver = FixedGridSolver(get_tableau(f"iie{r}"), steps=1, interval=0.25)
    y1 = solver.step(lambda t, y, n, i: -0.4 * y, torch.tensor(1.0, dtype=torch.float64), 0)
    assert_equal_up_to_rounding(y1, torch.tensor(sum(z**m for m in range(r + 2)), dtype=torch.float64), r + 1)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(a=((), (0.5,)), b=(0.5, 0.4), c=(0.0, 0.5)), "b sums to"),
        (dict(a=((), (0.5,)), b=(0.5, 0.5), c=(0.0, 1.0)), "row sum"),
        (dict(a=((0.1,), (0.5,)), b=(0.5, 0.5), c=(0.0, 0.5)), "strictly lower triangular"),
        (dict(a=((),), b=(1.0,), c=(0.0, 1.0)), "stages"),
    ],
)
def test_invalid_tableau_is_rejected_on_creation(kwargs, message):
    with pytest.raises(ValueError, match=message):
        ButcherTableau("bad", 1, **kwargs)


def test_unknown_method_names_valid_methods():
    with pytest.raises(ValueError, match="rk5.*euler, midpoint, heun, ralston, rk3, rk4, rk4_38"):
        get_tableau("rk5")
