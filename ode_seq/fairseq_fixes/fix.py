"""One named change to fairseq 0.12 (:mod:`ode_seq.fairseq_fixes` applies them)."""

from __future__ import annotations

import importlib
import sys
from typing import ClassVar, Tuple


class FairseqFix:
    """A fix: its docstring states fairseq's bug and the fix, ``issues`` the upstream reports.

    ``patches`` names every fairseq object that :meth:`apply` replaces, as a dotted path (a module
    attribute ``fairseq.options.parse_args_and_arch``, or a class attribute
    ``fairseq.tasks.translation.TranslationTask.setup_task``); no two fixes name the same one, so
    fixes apply in any order. ``changes_working_runs``: whether a fairseq run that works without
    the fix (of any architecture, ODE or not) does or writes something else with it, rather than
    only a run that would stop working or explaining itself better (True unless a fix says otherwise)."""

    name: ClassVar[str]
    issues: ClassVar[Tuple[str, ...]] = ()
    patches: ClassVar[Tuple[str, ...]] = ()
    changes_working_runs: ClassVar[bool] = True

    def apply(self) -> None:
        raise NotImplementedError


class ReplacementFix(FairseqFix):
    """A fix that sets the one module attribute it ``patches`` to ``replacement``, a subclass of
    fairseq's class that has the fix. ``program_module``: the module is a fairseq program's
    (``fairseq_cli.train``), imported before the plugin loads where that program runs; in any
    other process there is nothing to patch, and it is not imported."""

    replacement: ClassVar[type]
    program_module: ClassVar[bool] = False

    def apply(self) -> None:
        (target,) = self.patches
        name, _, attribute = target.rpartition(".")
        module = sys.modules.get(name) if self.program_module else importlib.import_module(name)
        if module is not None:
            setattr(module, attribute, self.replacement)
