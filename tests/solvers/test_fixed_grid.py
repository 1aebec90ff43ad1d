"""One grid loop: stage times, observers, output combinations, nodes and stage checkpointing."""

import pytest
import torch

from ode_seq.solvers import FixedGridSolver, ObserverGroup, SolveObserver, SplitField, get_tableau
from tests.numerics import assert_equal_up_to_rounding


class Log(SolveObserver):
    def __init__(self):
        self.events = []

    def solve_started(self, solver, y):
        self.events.append(("start", y.clone()))

    def stage_evaluated(self, step, stage, t, z, k):
        self.events.append((step, stage, t, z.clone(), k.clone()))

    def solve_finished(self, y):
        self.events.append(("end", y.clone()))


def _field_log():
    calls = []

    def field(t, z, step, stage):
        calls.append((step, stage, t))
        return torch.sin(t + z)

    return field, calls


def test_field_and_observers_see_every_stage_at_its_time_in_order():
    solver = FixedGridSolver(get_tableau("rk4"), steps=3, interval=1.5)
    field, calls = _field_log()
    log, second = Log(), Log()
    y0 = torch.tensor([0.3, -1.0], dtype=torch.float64)
    y = solver.solve(field, y0, ObserverGroup([log, second]))
    c = (0.0, 0.5, 0.5, 1.0)
    assert calls == [(n, i, pytest.approx((n + c[i]) * 0.5)) for n in range(3) for i in range(4)]
    stages = log.events[1:-1]
    assert [(e[0], e[1]) for e in stages] == [(n, i) for n in range(3) for i in range(4)]
    assert torch.equal(log.events[0][1], y0) and torch.equal(log.events[-1][1], y)
    assert torch.equal(stages[0][3], y0)  # stage 1 of step 0 starts at y_0
    assert torch.equal(stages[4][3], solver.step(field, y0, 0))  # stage 1 of step 1 starts at y_1
    assert len(second.events) == len(log.events)


def test_split_field_step_is_the_method_on_each_part_in_turn():
    # Lie–Trotter: y_{n+1} = Φ_h^{F_2}(Φ_h^{F_1}(y_n)); observers number evaluations m·s + i.
    solver = FixedGridSolver(get_tableau("heun"), steps=2, interval=0.8)
    f1 = lambda t, z, step, stage: torch.sin(z) + t  # noqa: E731
    f2 = lambda t, z, step, stage: z * z - 0.5 * t  # noqa: E731
    y0 = torch.tensor([0.3, -0.7], dtype=torch.float64)
    expected = y0
    for n in range(2):
        expected = solver.step(f2, solver.step(f1, expected, n), n)
    log = Log()
    calls = []
    logged_f1 = lambda t, z, step, stage: (calls.append((1, step, stage)), f1(t, z, step, stage))[1]  # noqa: E731
    logged_f2 = lambda t, z, step, stage: (calls.append((2, step, stage)), f2(t, z, step, stage))[1]  # noqa: E731
    y = solver.solve(SplitField((logged_f1, logged_f2)), y0, log)
    torch.testing.assert_close(y, expected, atol=0, rtol=0)
    assert calls == [(m, n, i) for n in range(2) for m in (1, 2) for i in range(2)]
    assert [(e[0], e[1]) for e in log.events[1:-1]] == [(n, i) for n in range(2) for i in range(4)]
    assert torch.equal(log.events[3][3], solver.step(f1, y0, 0))  # F_2 starts where F_1 ended


def test_nodes_move_the_stage_times_not_the_grid():
    euler = FixedGridSolver(get_tableau("euler"), steps=4, interval=2.0)
    right_end = FixedGridSolver(get_tableau("euler"), steps=4, interval=2.0, nodes=(1.0,))
    assert [euler.stage_time(n, 0) for n in range(4)] == [0.0, 0.5, 1.0, 1.5]
    assert [right_end.stage_time(n, 0) for n in range(4)] == [0.5, 1.0, 1.5, 2.0]
    field = lambda t, z, step, stage: t * torch.ones_like(z)  # noqa: E731  y(2) = Σ h t_n
    y0 = torch.zeros(1, dtype=torch.float64)
    assert euler.solve(field, y0).item() == pytest.approx(0.5 * (0 + 0.5 + 1.0 + 1.5))
    assert right_end.solve(field, y0).item() == pytest.approx(0.5 * (0.5 + 1.0 + 1.5 + 2.0))


def test_output_combination_replaces_the_tableau_weights():
    ones = lambda ks: ks[0] + ks[1]  # noqa: E731  w = (1, 1)
    solver = FixedGridSolver(get_tableau("heun"), steps=1, interval=0.5, combine=ones)
    f = lambda t, z, step, stage: z * z  # noqa: E731
    y = torch.tensor(0.7, dtype=torch.float64)
    k1 = y * y
    k2 = (y + 0.5 * k1) ** 2
    assert solver.solve(f, y).item() == pytest.approx((y + 0.5 * (k1 + k2)).item())


@pytest.mark.numerics
def test_stage_checkpointing_keeps_values_and_gradients():
    weight = torch.randn(4, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    results = []
    for checkpointed in (False, True):
        w = weight.clone().requires_grad_()
        solver = FixedGridSolver(get_tableau("rk4"), steps=2, checkpoint_stages=checkpointed)
        y = solver.solve(lambda t, z, step, stage: torch.tanh(z @ w), torch.ones(2, 4, dtype=torch.float64))
        y.sum().backward()
        results.append((y.detach(), w.grad))
    torch.testing.assert_close(results[0][0], results[1][0], atol=0, rtol=0)
    assert_equal_up_to_rounding(results[1][1], results[0][1], 2 * 8)  # 8 evaluations, forward and back
