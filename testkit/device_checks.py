"""Checks of ode-seq's models on one device and in reduced precision, each result a dict (one JSON
line of ``python -m benchmarks.gpu_checks``, which runs them on the GPU; the tests run some on the CPU).

- decoding: incremental decoding (one position at a time, with the blocks' stage caches) against
  the full forward pass, for every fixed-grid method and coefficient mode, in fp32 and bf16 (model
  cast to bf16). The error is max |Δ log p| over the target positions. fp32 passes at
  ``FP32_TOLERANCE``; bf16 passes when its error is at most ``BF16_FACTOR`` × the error bf16
  rounding itself makes (max |log p_bf16 − log p_fp32| of the full forward), and finite.
- training: a few updates of every model family (:mod:`testkit.families`, and the plain
  residual model) through fairseq's own Trainer with ``--fp16`` and with ``--bf16``, as
  fairseq-train runs them: passes when no step raises and every loss is finite.
- adaptive: the dopri5 encoder in fp16 and bf16 against fp32: field evaluations and the relative
  error of the encoder output; passes when it is at most ``ADAPTIVE_FACTOR`` × the relative error
  of the same shared layer integrated by RK4 on its fixed grid in the same precision.
"""

from __future__ import annotations

import math
import traceback
from dataclasses import dataclass
from typing import Any, Dict, Iterator, List, Sequence, Tuple

import torch

from ode_seq.analysis.solver_counts import adaptive_blocks
from ode_seq.solvers import EvaluationCounter
from ode_seq.solvers.coefficients import COEFFICIENT_MODES
from ode_seq.solvers.tableaus import TABLEAUS

from .by_name import DictionaryTask, build_model, random_batch, transformer_sizes, word_dictionary
from .families import FEATURES, command_line
from .in_process import PLUGIN_DIR, fairseq_trainer
from .incremental_decoding import full_and_incremental_log_probs, max_difference

FP32_TOLERANCE = 1e-4
BF16_FACTOR = 2.0
ADAPTIVE_FACTOR = 2.0
TRAINING_UPDATES = 3
PRECISIONS = {"fp16": ["--fp16"], "bf16": ["--bf16"]}
DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}


@dataclass(frozen=True)
class Sizes:
    """Model sizes of the checks: the GPU run's, or tiny ones for ``--smoke``."""

    embed_dim: int
    heads: int
    layers: int
    vocab: int
    lengths: Tuple[int, ...]

    def options(self) -> Dict[str, int]:
        return dict(
            transformer_sizes(self.embed_dim, self.heads), encoder_layers=self.layers, decoder_layers=self.layers
        )


GPU_SIZES = Sizes(embed_dim=512, heads=8, layers=2, vocab=1000, lengths=(12, 7, 16, 9))
SMOKE_SIZES = Sizes(embed_dim=32, heads=4, layers=2, vocab=30, lengths=(6, 3, 8, 5))


def method_modes() -> Iterator[Tuple[str, str]]:
    """Every fixed-grid method with every coefficient mode it admits (only ``fixed`` weights a
    one-stage method)."""
    for method, tableau in TABLEAUS.items():
        for mode in COEFFICIENT_MODES:
            if mode == "fixed" or tableau.stages >= 2:
                yield method, mode


def decoding_checks(sizes: Sizes, device: str) -> Iterator[Dict[str, Any]]:
    """Every method and mode; with the smoke sizes, every method with fixed weights and RK4 with
    every mode (the test suite checks all of them on the CPU)."""
    task = DictionaryTask(word_dictionary(sizes.vocab))
    for method, mode in method_modes():
        if sizes == SMOKE_SIZES and mode != "fixed" and method != "rk4":
            continue
        model = (
            build_model(
                "ode_transformer_rk4_encdec",
                task,
                encoder_ode_method=method,
                decoder_ode_method=method,
                ode_coefficients=mode,
                **sizes.options(),
            )
            .to(device)
            .eval()
        )
        full32, inc32, mask = full_and_incremental_log_probs(model, task, sizes.lengths)
        yield decoding_result(f"{method}/{mode}", "fp32", max_difference(full32, inc32, mask), FP32_TOLERANCE)
        full16, inc16, _ = full_and_incremental_log_probs(model.to(torch.bfloat16), task, sizes.lengths)
        rounding = max_difference(full16, full32, mask)
        error16 = max_difference(full16, inc16, mask)
        yield decoding_result(f"{method}/{mode}", "bf16", error16, BF16_FACTOR * rounding, rounding=rounding)


def decoding_result(name: str, dtype: str, error: float, tolerance: float, **measured: float) -> Dict[str, Any]:
    """A decoding check's line: passed when ``error`` is finite and at most ``tolerance``."""
    return dict(
        group="decoding",
        name=name,
        dtype=dtype,
        error=error,
        **measured,
        tolerance=tolerance,
        passed=math.isfinite(error) and error <= tolerance,
    )


SMOKE_FAMILIES = ("residual (euler)", "dopri5, parallel field, shared weights")


def training_families(smoke: bool) -> Dict[str, Tuple[str, Dict[str, Any]]]:
    """Every family, or with ``smoke`` two (the reliability tests train every family on the CPU)."""
    families = {"residual (euler)": ("ode_transformer_euler_small", {}), **FEATURES}
    return {name: arch for name, arch in families.items() if not smoke or name in SMOKE_FAMILIES}


def training_arguments(
    data_bin: str,
    arch: str,
    model_options: Dict[str, Any],
    precision: str,
    device: str,
    lr: float = 1e-4,
    warmup_updates: int = 10,
    max_tokens: int = 1024,
    extra: Sequence[str] = (),
) -> List[str]:
    """fairseq-train's command line for the translation model ``arch`` with ``model_options``:
    shared embeddings, label smoothing 0.1, then :func:`trainer_arguments`."""
    return [
        data_bin,
        "--user-dir",
        PLUGIN_DIR,
        "--arch",
        arch,
        *command_line(model_options),
        "--share-all-embeddings",
        "--criterion",
        "label_smoothed_cross_entropy",
        "--label-smoothing",
        "0.1",
        *trainer_arguments(precision, device, lr, warmup_updates, max_tokens, extra),
    ]


def trainer_arguments(
    precision: str, device: str, lr: float, warmup_updates: int, max_tokens: int, extra: Sequence[str]
) -> List[str]:
    """fairseq-train's options of any task's training in ``precision`` (fp16 or bf16) on
    ``device``: Adam at ``lr`` after ``warmup_updates`` of inverse-square-root warm-up,
    ``max_tokens`` per batch, seed 1, no checkpoints (so no save directory is locked or written);
    then ``extra``."""
    args = [
        "--optimizer",
        "adam",
        "--lr",
        str(lr),
        "--lr-scheduler",
        "inverse_sqrt",
        "--warmup-updates",
        str(warmup_updates),
        "--max-tokens",
        str(max_tokens),
        "--num-workers",
        "0",
        "--seed",
        "1",
        "--no-progress-bar",
        "--no-save",
        *extra,
        *PRECISIONS[precision],
    ]
    if device == "cpu":
        # On a CPU, fairseq's flat fp32 master copy and its fp16-overflow handler ask torch.cuda for
        # a device (docs/reliability.md): no flattening, and a loss scale too small to overflow.
        args += ["--cpu", "--fp16-no-flatten-grads", "--fp16-init-scale", "1"]
    return args


def train_a_few_updates(args: Sequence[str]) -> Dict[str, Any]:
    """Build fairseq-train's Trainer for ``args`` in this process and run a few updates."""
    trainer, epoch = fairseq_trainer(args)
    batches = epoch.next_epoch_itr(shuffle=False)
    losses = []  # None: an fp16 overflow, whose update the loss scaler skipped
    while trainer.get_num_updates() < TRAINING_UPDATES and len(losses) < 3 * TRAINING_UPDATES:
        output = trainer.train_step([next(batches)])
        losses.append(None if output is None else float(output["loss"]))
    parameter = next(trainer.model.parameters())
    return dict(
        losses=losses,
        updates=trainer.get_num_updates(),
        parameter_dtype=str(parameter.dtype),
        device=str(parameter.device),
    )


def training_checks(sizes: Sizes, device: str, data_bin: str) -> Iterator[Dict[str, Any]]:
    for family, (arch, family_options) in training_families(sizes == SMOKE_SIZES).items():
        for precision in PRECISIONS:
            result = dict(group="training", name=family, dtype=precision)
            try:
                options = {**sizes.options(), **family_options}
                outcome = train_a_few_updates(training_arguments(data_bin, arch, options, precision, device))
            except Exception as error:  # the check's finding: which family, which precision, why
                yield dict(
                    result,
                    passed=False,
                    error=f"{type(error).__name__}: {error}",
                    traceback=traceback.format_exc(limit=-4),
                )
                continue
            finite = all(math.isfinite(loss) for loss in outcome["losses"] if loss is not None)
            yield dict(result, **outcome, passed=finite and outcome["updates"] == TRAINING_UPDATES)


def adaptive_checks(sizes: Sizes, device: str) -> Iterator[Dict[str, Any]]:
    """The dopri5 encoder's output in fp16 and bf16 against fp32, beside the same shared layer on
    RK4's fixed grid: passes when its relative error is at most ``ADAPTIVE_FACTOR`` × RK4's."""
    task = DictionaryTask(word_dictionary(sizes.vocab))
    arch, family_options = FEATURES["dopri5, parallel field, shared weights"]
    src, lengths, _ = random_batch(task, sizes.lengths, seed=5, device=device)

    def encode(model, dtype: torch.dtype) -> Tuple[torch.Tensor, int]:
        model.to(dtype)
        counters = [EvaluationCounter() for _ in adaptive_blocks(model.encoder)]
        handles = [b.register_observer(c) for b, c in zip(adaptive_blocks(model.encoder), counters)]
        try:
            with torch.no_grad():
                out = model.encoder(src, src_lengths=lengths)["encoder_out"][0].float()
        finally:
            for handle in handles:
                handle.remove()
        return out, sum(c.count for c in counters)

    def relative_errors(method: str) -> Dict[str, Tuple[float, int]]:
        model = (
            build_model(arch, task, **{**sizes.options(), **family_options}, encoder_ode_method=method)
            .to(device)
            .eval()
        )
        reference, evaluations = encode(model, torch.float32)
        errors = {"fp32": (0.0, evaluations)}
        for name in ("fp16", "bf16"):
            out, evaluations = encode(model, DTYPES[name])
            errors[name] = (((out - reference).norm() / reference.norm()).item(), evaluations)
        return errors

    adaptive, fixed = relative_errors("dopri5"), relative_errors("rk4")
    for name in ("fp16", "bf16"):
        (relative, evaluations), tolerance = adaptive[name], ADAPTIVE_FACTOR * fixed[name][0]
        yield dict(
            group="adaptive",
            name="dopri5 encoder",
            dtype=name,
            relative_error=relative,
            rk4_relative_error=fixed[name][0],
            evaluations=evaluations,
            fp32_evaluations=adaptive["fp32"][1],
            tolerance=tolerance,
            passed=math.isfinite(relative) and relative <= tolerance,
        )
