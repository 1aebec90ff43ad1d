"""QR-method Lyapunov exponents against linear systems with known spectra and finite differences."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from ode_seq.analysis.lyapunov import lyapunov_exponents, token_lyapunov_exponents, token_tangent_maps
from ode_seq.solvers import FixedGridSolver, get_tableau
from tests.numerics import assert_equal_up_to_rounding


def _normal_matrix(seed: int = 0) -> tuple:
    """A = U · blockdiag([[a, -b], [b, a]], c, e) · Uᵀ, U orthogonal: eigenvalues a ± ib, c, e."""
    g = torch.Generator().manual_seed(seed)
    a, b, c, e = 0.3, 2.0, -0.5, -1.2
    core = torch.tensor([[a, -b, 0, 0], [b, a, 0, 0], [0, 0, c, 0], [0, 0, 0, e]], dtype=torch.float64)
    u, _ = torch.linalg.qr(torch.randn(4, 4, generator=g, dtype=torch.float64))
    eigenvalues = np.array([a + 1j * b, a - 1j * b, c, e])
    return u @ core @ u.T, eigenvalues


# Finite-time exponents approach the asymptotic ones as O(1/T) (the start frame's transient).
HORIZON = 200.0
TOLERANCE = 4 / HORIZON


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_linear_flow_exponents_equal_real_parts_of_eigenvalues(seed):
    matrix, eigenvalues = _normal_matrix(seed)
    h = 0.25
    flow = torch.linalg.matrix_exp(h * matrix)
    exponents = lyapunov_exponents([flow] * int(HORIZON / h), dt=h)
    expected = np.sort(eigenvalues.real)[::-1]
    np.testing.assert_allclose(np.sort(exponents)[::-1], expected, atol=TOLERANCE)


def test_rk4_steps_of_linear_system_give_log_of_stability_function():
    """x' = A x by the project's RK4 step: λ_i = log|R(hμ_i)| / h with R(z) = Σ_{n≤4} zⁿ/n!."""
    matrix, eigenvalues = _normal_matrix(seed=1)
    h = 0.2
    solver = FixedGridSolver(get_tableau("rk4"), steps=1, interval=h)

    def rk4_map(x):  # x: (1 token, 4)
        return solver.step(lambda t, z, step, stage: z @ matrix.T, x, 0)

    result = token_lyapunov_exponents([rk4_map] * int(HORIZON / h), torch.ones(1, 4, dtype=torch.float64), dt=h)
    z = h * eigenvalues
    stability = 1 + z + z**2 / 2 + z**3 / 6 + z**4 / 24
    expected = np.sort(np.log(np.abs(stability)) / h)[::-1]
    np.testing.assert_allclose(np.sort(result.exponents[0])[::-1], expected, atol=TOLERANCE)
    assert result.scores[0] == pytest.approx(expected[0], abs=TOLERANCE)


def _random_token_maps(tokens: int, dim: int, layers: int, seed: int = 0):
    """f_l(X) = X + ½ tanh(M_l X W_l + b_l): M_l mixes tokens, W_l features (float64)."""
    g = torch.Generator().manual_seed(seed)
    params = [
        (
            torch.randn(tokens, tokens, generator=g, dtype=torch.float64) / tokens,
            torch.randn(dim, dim, generator=g, dtype=torch.float64),
            torch.randn(dim, generator=g, dtype=torch.float64),
        )
        for _ in range(layers)
    ]
    return [lambda x, p=p: x + 0.5 * torch.tanh(p[0] @ x @ p[1] + p[2]) for p in params]


def finite_difference_exponents(maps, x0: np.ndarray, dt: float, eps: float = 1e-6) -> np.ndarray:
    """Reference, the paper's definition: Q_k ← QR((I + ∂(f − id)_j/∂x_k) Q_k) for j = last and
    every token k, the derivative by central differences, QR by numpy."""
    tokens, dim = x0.shape
    q = np.stack([np.eye(dim) for _ in range(tokens)])
    growth = np.zeros((tokens, dim))
    x = x0.copy()
    for f in maps:
        increment = lambda v: f(torch.from_numpy(v)).detach().numpy()[-1] - v[-1]  # noqa: E731
        for k in range(tokens):
            tangent = np.eye(dim)
            for i in range(dim):
                step = np.zeros_like(x)
                step[k, i] = eps
                tangent[:, i] += (increment(x + step) - increment(x - step)) / (2 * eps)
            q[k], r = np.linalg.qr(tangent @ q[k])
            growth[k] += np.log(np.abs(np.diag(r)))
        x = f(torch.from_numpy(x)).detach().numpy()
    return growth / (len(maps) * dt)


@pytest.mark.numerics
def test_token_tangent_adds_the_identity_for_every_token_but_the_position():
    # M^{jk} = I + ∂(f − id)_j/∂x_k: for f(X) = X + A X (tokens mixed by A) it is δ_jk I + A_jk I + I (k ≠ j).
    a = torch.tensor([[0.5, 0.2, -0.1], [0.3, -0.4, 0.7], [0.25, -0.6, 0.15]], dtype=torch.float64)
    x = torch.randn(3, 2, dtype=torch.float64)
    maps = token_tangent_maps(lambda z: z + a @ z, x, position=-1)
    for k in range(3):
        expected = (a[2, k] + 1.0) * torch.eye(2, dtype=torch.float64)
        assert_equal_up_to_rounding(maps[k], expected, 1)


def test_token_exponents_of_random_nonlinear_maps_match_finite_differences():
    tokens, dim = 4, 3
    maps = _random_token_maps(tokens, dim, layers=3)
    x0 = torch.randn(tokens, dim, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    result = token_lyapunov_exponents(maps, x0, position=-1, dt=1.0)
    expected = finite_difference_exponents(maps, x0.numpy(), dt=1.0)
    np.testing.assert_allclose(result.exponents, expected, rtol=1e-6, atol=1e-7)
    assert result.running_max.shape == (3, tokens)
    np.testing.assert_allclose(result.running_max[-1], expected.max(axis=1), rtol=1e-6, atol=1e-7)


def test_fewer_exponents_are_the_leading_ones_of_the_full_set():
    maps = _random_token_maps(3, 5, layers=4, seed=2)
    x0 = torch.randn(3, 5, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    full = token_lyapunov_exponents(maps, x0).exponents
    leading = token_lyapunov_exponents(maps, x0, num_exponents=2).exponents
    np.testing.assert_allclose(leading, full[:, :2], rtol=1e-10, atol=1e-12)


def test_exponent_count_outside_state_size_is_refused():
    maps = _random_token_maps(2, 3, layers=1)
    with pytest.raises(ValueError, match=r"num_exponents must be in 1\.\.3"):
        token_lyapunov_exponents(maps, torch.zeros(2, 3, dtype=torch.float64), num_exponents=4)
