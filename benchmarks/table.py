"""Rows of ratios with their targets, printed as one Markdown table."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Dict, List, Optional, Sequence


@dataclass(frozen=True)
class Row:
    """``ratio`` = numerator / denominator of ``metric``; ``target`` like (">=", 0.95) or None."""

    section: str
    comparison: str
    metric: str
    ratio: float
    target: Optional[tuple] = None
    detail: str = ""

    @property
    def met(self) -> Optional[bool]:
        if self.target is None or not math.isfinite(self.ratio):
            return None
        op, bound = self.target
        return self.ratio >= bound if op == ">=" else self.ratio <= bound

    def as_dict(self) -> Dict:
        return dict(asdict(self), target=list(self.target) if self.target else None, met=self.met)


def _target_text(row: Row) -> str:
    return "" if row.target is None else f"{row.target[0]} {row.target[1]:g}"


def _met_text(row: Row) -> str:
    return {None: "", True: "yes", False: "NO"}[row.met]


def markdown(rows: Sequence[Row]) -> str:
    """| section | comparison | metric | ratio | target | met | detail |"""
    header = ["section", "comparison", "metric", "ratio", "target", "met", "detail"]
    lines: List[str] = [
        "| " + " | ".join(header) + " |",
        "|" + "|".join("---" for _ in header) + "|",
    ]
    for r in rows:
        cells = [r.section, r.comparison, r.metric, f"{r.ratio:.3f}", _target_text(r), _met_text(r), r.detail]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)
