"""Explicit Runge–Kutta methods as Butcher tableaus.

A tableau (A, b, c) with s stages defines one step of size h for dy/dt = F(t, y):

    k_i = F(t + c_i h, y + h Σ_{j<i} a_ij k_j),    y' = y + h Σ_i b_i k_i.

Adding a method is adding one entry to ``TABLEAUS``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Dict, Tuple

_TOL = 1e-12


@dataclass(frozen=True)
class ButcherTableau:
    """An explicit Runge–Kutta method; validated on creation.

    ``a[i]`` holds the i coefficients a_i0 … a_i(i-1) of stage i (A strictly lower triangular).
    ``order`` is the method's classical order of accuracy.
    """

    name: str
    order: int
    a: Tuple[Tuple[float, ...], ...]
    b: Tuple[float, ...]
    c: Tuple[float, ...]

    def __post_init__(self) -> None:
        s = len(self.b)
        if s == 0 or len(self.a) != s or len(self.c) != s:
            raise ValueError(f"tableau {self.name!r}: a, b and c must all have {s} stages")
        for i, row in enumerate(self.a):
            if len(row) != i:
                raise ValueError(
                    f"tableau {self.name!r}: row {i} of A has {len(row)} entries; an explicit "
                    f"method needs exactly {i} (A strictly lower triangular)"
                )
            if not math.isclose(sum(row), self.c[i], abs_tol=_TOL):
                raise ValueError(
                    f"tableau {self.name!r}: c[{i}]={self.c[i]} differs from the row sum of A "
                    f"({sum(row)}); the method would be inconsistent"
                )
        if not math.isclose(sum(self.b), 1.0, abs_tol=_TOL):
            raise ValueError(f"tableau {self.name!r}: b sums to {sum(self.b)}, not 1")
        if self.order < 1:
            raise ValueError(f"tableau {self.name!r}: order must be at least 1")

    @property
    def stages(self) -> int:
        return len(self.b)


def iterated_implicit_euler(r: int) -> ButcherTableau:
    """IIET's iterated implicit Euler (Liu et al., 2025) with r fixed-point iterations:

        x⁽⁰⁾ = y + h F(y),   x⁽ⁱ⁾ = y + h F(x⁽ⁱ⁻¹⁾) (i = 1 … r),   y' = x⁽ʳ⁾,

    i.e. s = r + 1 stages with a_{i,i−1} = 1, b = (0, …, 0, 1), c = (0, 1, …, 1): r + 1 field
    evaluations, classical order 1. On y' = λy a step multiplies y by Σ_{m=0}^{r+1} (hλ)^m, the
    truncated series of implicit Euler's 1/(1 − hλ).
    """
    stages = r + 1
    return ButcherTableau(
        f"iie{r}",
        1,
        a=tuple(tuple(1.0 if j == i - 1 else 0.0 for j in range(i)) for i in range(stages)),
        b=(0.0,) * r + (1.0,),
        c=(0.0,) + (1.0,) * r,
    )


TABLEAUS: Dict[str, ButcherTableau] = {
    t.name: t
    for t in (
        ButcherTableau("euler", 1, a=((),), b=(1.0,), c=(0.0,)),
        ButcherTableau("midpoint", 2, a=((), (0.5,)), b=(0.0, 1.0), c=(0.0, 0.5)),
        # Heun's method: the paper's RK2 block, y' = y + (k1 + k2)/2 with k2 = F(y + k1).
        ButcherTableau("heun", 2, a=((), (1.0,)), b=(0.5, 0.5), c=(0.0, 1.0)),
        ButcherTableau("ralston", 2, a=((), (2 / 3,)), b=(0.25, 0.75), c=(0.0, 2 / 3)),
        # Kutta's third-order method: k3 = F(y - k1 + 2 k2) (the public code wrongly used y + k2).
        ButcherTableau("rk3", 3, a=((), (0.5,), (-1.0, 2.0)), b=(1 / 6, 2 / 3, 1 / 6), c=(0.0, 0.5, 1.0)),
        ButcherTableau(
            "rk4",
            4,
            a=((), (0.5,), (0.0, 0.5), (0.0, 0.0, 1.0)),
            b=(1 / 6, 1 / 3, 1 / 3, 1 / 6),
            c=(0.0, 0.5, 0.5, 1.0),
        ),
        ButcherTableau(
            "rk4_38",
            4,
            a=((), (1 / 3,), (-1 / 3, 1.0), (1.0, -1.0, 1.0)),
            b=(1 / 8, 3 / 8, 3 / 8, 1 / 8),
            c=(0.0, 1 / 3, 2 / 3, 1.0),
        ),
        *(iterated_implicit_euler(r) for r in range(1, 5)),
    )
}


def get_tableau(name: str) -> ButcherTableau:
    """The tableau called ``name``; a ValueError listing the valid names otherwise."""
    try:
        return TABLEAUS[name]
    except KeyError:
        raise ValueError(f"unknown Runge-Kutta method {name!r}; choose one of: {', '.join(TABLEAUS)}") from None
