"""The solvers are apart from fairseq: they import and solve with fairseq unimportable."""

import subprocess
import sys

from tests.e2e.cli import ROOT

BLOCKED_FAIRSEQ = """
import sys
sys.modules["fairseq"] = None  # any import of fairseq or fairseq.* now raises ImportError
import torch
import ode_seq.solvers as solvers
solver = solvers.FixedGridSolver(solvers.get_tableau("rk4"), steps=4, interval=1.0)
y = solver.solve(lambda t, y, step, stage: -y, torch.ones(3, dtype=torch.float64))
adaptive = solvers.AdaptiveSolver("dopri5", rtol=1e-8, atol=1e-10)
z = adaptive.solve(lambda t, y, step, stage: -y, torch.ones(3, dtype=torch.float64))
print(round(float(y[0]), 4), round(float(z[0]), 4))
print(sorted(m for m in sys.modules if m.startswith("fairseq") and sys.modules[m] is not None))
"""


def test_solvers_import_and_solve_with_fairseq_unimportable():
    result = subprocess.run([sys.executable, "-c", BLOCKED_FAIRSEQ], capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split("\n")[:2] == ["0.3679 0.3679", "[]"]
