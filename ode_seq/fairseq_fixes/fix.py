"""One named change to fairseq 0.12 (:mod:`ode_seq.fairseq_fixes` applies them)."""

from __future__ import annotations

from typing import ClassVar, Tuple


class FairseqFix:
    """A fix: its docstring states fairseq's bug and the fix, ``issues`` the upstream reports."""

    name: ClassVar[str]
    issues: ClassVar[Tuple[str, ...]] = ()

    def apply(self) -> None:
        raise NotImplementedError
