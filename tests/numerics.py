"""Tolerances of floating-point comparisons, derived from what is compared (issue 28).

Two evaluations of the same formula that differ only in rounding (another CPU's kernels, another
summation order or thread count, an equivalent rewriting of the formula) differ by at most

    tol = C · ε · max |expected| · evaluations

- ε: the machine epsilon of the precision computed in (2⁻²³ for float32, 2⁻⁵² for float64).
  fairseq's softmax and log-softmax run in float32 whatever the model's dtype, so the values of a
  model (:func:`assert_computes`) are compared at ε of float32 even when it runs in float64.
- max |expected|: the largest finite magnitude compared; rounding errors are relative to it. Where
  the compared values are sums of larger terms that cancel, the magnitude of the terms replaces it
  (a sum's rounding is relative to Σ |terms|).
- evaluations: the number of layer (field) evaluations between the input and the compared output,
  counted by :class:`LayerEvaluations` or known from the formula (the stages of one solver step).
  Each evaluation re-rounds everything it reads, and the differences of successive evaluations
  add up (the residual stream carries them forward without shrinking them).
- C = 4: one layer evaluation chains about four reductions (attention scores and softmax, the
  attention-weighted sum with the output projection, the feed-forward matrix products, the layer
  norm statistics); two correct kernels (another blocking of the same sums, FMA or not, another
  vectorised exp) differ by about one ulp of the result in each.

The differences measured stay below a third of this bound on every CPU setting tried
(scripts/test_numerics.sh, docs/numerics.md), and a change of 1e-4 in one weight of a recorded
fixture exceeds it (tests/test_fixture_checkpoints.py). Where the claim is exactness (a block equals
its formula, an export equals its model) the tests compute in float64: only fairseq's float32
softmaxes are left to round, far inside the bound, on any machine. Recorded float32 values (the
fixtures) are compared at float32. Comparisons whose claim is bitwise identity (a resumed training,
the same arithmetic repeated) stay exact and do not use this module.
"""

from __future__ import annotations

import os
from typing import Any, Callable, Dict, Optional, Sequence

import torch
from torch import nn

from testkit.by_name import random_batch
from testkit.incremental_decoding import full_and_incremental_log_probs

C = 4
LOG_VARIABLE = "ODE_SEQ_NUMERICS_LOG"


def rounding_tolerance(magnitude: torch.Tensor, evaluations: int, precision: Optional[torch.dtype] = None) -> float:
    """C · ε(precision, default: magnitude's dtype) · max |magnitude| (finite entries) · evaluations."""
    if evaluations < 1:
        raise ValueError(f"evaluations must be >= 1, got {evaluations}: count the layer evaluations compared")
    finite = magnitude.detach()[torch.isfinite(magnitude.detach())]
    scale = finite.abs().max().item() if finite.numel() else 0.0
    return C * torch.finfo(precision or magnitude.dtype).eps * scale * evaluations


def _log_share_of_tolerance(actual: torch.Tensor, expected: torch.Tensor, tolerance: float) -> None:
    """With ``ODE_SEQ_NUMERICS_LOG=FILE`` (scripts/test_numerics.sh), append the test's name and
    max |actual − expected| / tolerance of a comparison that passed to FILE."""
    path = os.environ.get(LOG_VARIABLE)
    if not path or actual.shape != expected.shape:
        return
    difference = (actual.detach().double() - expected.detach().double()).abs().nan_to_num(0.0).max().item()
    share = difference / tolerance if tolerance else 0.0  # passed: a zero tolerance means no difference
    test = os.environ.get("PYTEST_CURRENT_TEST", "?").rpartition(" ")[0]
    with open(path, "a", encoding="utf-8") as f:
        f.write(f"{test}\t{share:.3g}\n")


def assert_equal_up_to_rounding(
    actual: torch.Tensor,
    expected: torch.Tensor,
    evaluations: int,
    precision: Optional[torch.dtype] = None,
    msg: Optional[str] = None,
    magnitude: Optional[torch.Tensor] = None,
) -> None:
    """|actual − expected| ≤ :func:`rounding_tolerance` (of ``magnitude``, default ``expected``)
    elementwise; non-finite entries must match."""
    tolerance = rounding_tolerance(expected if magnitude is None else magnitude, evaluations, precision)
    torch.testing.assert_close(
        actual,
        expected,
        atol=tolerance,
        rtol=0,
        msg=lambda default: (
            f"{msg + ': ' if msg else ''}{default}\n(tolerance {tolerance:.3g} = {C} · ε · "
            f"max|magnitude| · {evaluations} evaluations)"
        ),
    )
    _log_share_of_tolerance(actual, expected, tolerance)


def assert_rows_sum_to_one(probabilities: Any) -> None:
    """Each row (last dimension) of softmax probabilities sums to 1 up to rounding over two
    reductions: the softmax's normalising sum and this one."""
    sums = torch.as_tensor(probabilities).sum(-1)
    assert_equal_up_to_rounding(sums, torch.ones_like(sums), 2)


def score_tolerance(scores: Sequence[float], evaluations: int, decimals: Optional[int] = None) -> float:
    """Tolerance of scores of one model from two programs (fairseq-generate, CTranslate2, Hugging
    Face): rounding over its ``evaluations`` layer evaluations at float32, of the largest score;
    plus one unit in the last place for scores printed with ``decimals`` decimals (each print
    rounds by half a unit)."""
    tolerance = rounding_tolerance(torch.tensor(scores, dtype=torch.float32), evaluations)
    return tolerance + (10.0**-decimals if decimals is not None else 0.0)


def model_precision(dtype: torch.dtype) -> torch.dtype:
    """The precision a model of ``dtype`` computes in: float32 for float32 and float64 models, whose
    attention and output softmaxes fairseq runs in float32; ``dtype`` itself if coarser."""
    return dtype if torch.finfo(dtype).eps > torch.finfo(torch.float32).eps else torch.float32


class LayerEvaluations:
    """Counts the layer evaluations of ``model`` inside a ``with`` block: the calls of its
    attention modules named ``self_attn``, one per evaluation of an encoder or decoder layer's
    field (fairseq's, ode-seq's and Hugging Face's layers all name it so)."""

    def __init__(self, model: nn.Module) -> None:
        self.modules = [m for name, m in model.named_modules() if name.rpartition(".")[2] == "self_attn"]
        if not self.modules:
            raise ValueError(f"{type(model).__name__} has no module named self_attn to count evaluations of")
        self.count = 0
        self._hooks = []

    def _counted(self, *_) -> None:
        self.count += 1

    def __enter__(self) -> "LayerEvaluations":
        self._hooks = [m.register_forward_hook(self._counted) for m in self.modules]
        return self

    def __exit__(self, *_) -> None:
        for hook in self._hooks:
            hook.remove()


def assert_computes(
    model: nn.Module, compute: Callable[[], torch.Tensor], expected: torch.Tensor, msg: Optional[str] = None
) -> None:
    """``compute()``, which evaluates layers of ``model``, gives ``expected`` up to rounding over the
    layer evaluations it makes, at the model's precision (:func:`model_precision`)."""
    with LayerEvaluations(model) as evaluations:
        actual = compute()
    precision = model_precision(next(model.parameters()).dtype)
    assert_equal_up_to_rounding(actual, expected, evaluations.count, precision, msg)


def assert_same_tensors(
    actual: Dict[str, torch.Tensor],
    expected: Dict[str, torch.Tensor],
    evaluations: int,
    precision: Optional[torch.dtype] = None,
) -> None:
    """Tensors of the same names (a model's gradients, or its parameters after training), equal up
    to rounding compared as one vector: a gradient entry sums terms the size of the largest entries
    however small it comes out, and Adam's step, normalised by the gradient's own size, carries a
    gradient's relative rounding into every parameter. For gradients, ``evaluations`` counts the
    layer evaluations forward and back; for trainings, the updates."""
    assert actual.keys() == expected.keys() and len(expected) > 0, sorted(set(actual) ^ set(expected))
    names = sorted(expected)
    vector = lambda tensors: torch.cat([tensors[name].double().flatten() for name in names])  # noqa: E731
    precision = precision or expected[names[0]].dtype
    assert_equal_up_to_rounding(vector(actual), vector(expected), evaluations, precision)


def assert_incremental_decoding_equals_full_forward(
    model: Any, task: Any, lengths: Sequence[int], seed: int = 0
) -> None:
    """Incremental decoding gives the full forward pass's log-probabilities at every non-pad target
    position of :func:`random_batch` (task, lengths, seed), up to rounding over the layer evaluations
    of one full forward pass (``model`` in eval mode)."""
    full, incremental, mask = full_and_incremental_log_probs(model, task, lengths, seed)
    with LayerEvaluations(model) as evaluations, torch.no_grad():
        model(*random_batch(task, lengths, seed=seed))
    precision = model_precision(next(model.parameters()).dtype)
    assert_equal_up_to_rounding(incremental[mask], full[mask], evaluations.count, precision)
