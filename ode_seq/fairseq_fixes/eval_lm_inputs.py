"""fairseq-eval-lm refuses, naming the option and the fix, what it would otherwise score over part
of the text, past the model's positions, or stop on with a traceback."""

from __future__ import annotations

import functools
import inspect
import os
import sys
from argparse import Namespace
from typing import Any, Callable, Optional, Tuple

import numpy as np
from fairseq.dataclass.utils import convert_namespace_to_omegaconf
from fairseq.models import ARCH_MODEL_REGISTRY, FairseqLanguageModel
from fairseq.tasks.language_modeling import LanguageModelingTask

from ode_seq.checkpoint_files import load_checkpoint

from .fix import FairseqFix


def check_context_window(tokens_per_sample: int, context_window: int) -> None:
    """ValueError unless each block scores at least one new token: fairseq-eval-lm cuts the text into
    blocks of ``tokens_per_sample − context_window`` tokens (a ZeroDivisionError or negative sizes)."""
    if context_window > 0 and context_window >= tokens_per_sample:
        raise ValueError(
            f"--context-window {context_window} must be smaller than --tokens-per-sample {tokens_per_sample}: "
            f"fairseq-eval-lm scores blocks of tokens-per-sample - context-window = {tokens_per_sample} - "
            f"{context_window} = {tokens_per_sample - context_window} new tokens, each after up to "
            f"context-window tokens of context; pass --context-window {tokens_per_sample // 2} (any value "
            f"below {tokens_per_sample}) or a larger --tokens-per-sample"
        )


def _option(options: Any, name: str) -> Any:
    return options.get(name) if isinstance(options, dict) else getattr(options, name, None)


def checkpoint_task(path: str) -> Tuple[Optional[str], Optional[str]]:
    """(task name, architecture) checkpoint ``path`` was trained with (fairseq's ``cfg``, or the
    ``args`` of older checkpoints)."""
    state = load_checkpoint(path)
    if state.get("cfg"):
        task, model = state["cfg"]["task"], state["cfg"]["model"]
        return _option(task, "_name"), _option(model, "arch") or _option(model, "_name")
    args = state.get("args")
    return _option(args, "task"), _option(args, "arch")


def check_language_model(path: str) -> None:
    """ValueError when checkpoint ``path`` holds no language model (a translation model fails deep
    in fairseq-eval-lm, with an AttributeError or a dictionary error with the wrong advice)."""
    if not os.path.isfile(path):
        return  # fairseq's own error names it
    task, arch = checkpoint_task(path)
    model_class = ARCH_MODEL_REGISTRY.get(arch)
    if model_class is None or issubclass(model_class, FairseqLanguageModel):
        return
    raise ValueError(
        f"{path} is not a language model: it was trained with --task {task} (architecture {arch}), and "
        "fairseq-eval-lm scores language models only; score a translation model's references with "
        f"fairseq-generate DATA-BIN --path {path} --score-reference (on its translation data directory)"
    )


def checked_main(main: Callable) -> Callable:
    """fairseq-eval-lm's ``main`` that first checks the checkpoint's task and the context window."""

    @functools.wraps(main)
    def checked(cfg, **kwargs):
        if isinstance(cfg, Namespace):
            cfg = convert_namespace_to_omegaconf(cfg)
        check_context_window(cfg.task.tokens_per_sample, cfg.eval_lm.context_window)
        for path in cfg.common_eval.path.split(os.pathsep):
            check_language_model(path)
        return main(cfg, **kwargs)

    return checked


def longest_input(sizes: np.ndarray, block: int, context_window: int) -> int:
    """The most tokens fairseq-eval-lm gives the model at once: a sample of ``sizes``, with up to
    ``context_window`` tokens of the text before it, together at most ``block`` + ``context_window``
    (fairseq's ``LMContextWindowDataset``) unless the sample alone is longer."""
    longest = int(sizes.max(initial=0))
    window = max(context_window, 0)
    return min(longest + window, max(block + window, longest))


def positions_refusal(sizes: np.ndarray, block: int, context_window: int, positions: int) -> Optional[str]:
    """Why the samples (``sizes``, blocks of at most ``block`` tokens after eval-lm took the context
    window off --tokens-per-sample, or whole lines, which may be longer) do not fit a model of
    ``positions`` positions, with the fix; None when they fit."""
    longest = longest_input(sizes, block, context_window)
    if longest <= positions:
        return None
    window = max(context_window, 0)
    if int(sizes.max()) > block:  # --sample-break-mode eos/complete keeps a longer line whole
        cause = f"the longest sample holds {int(sizes.max())} tokens (its --sample-break-mode keeps lines whole)"
        fix = f"pass --sample-break-mode none --tokens-per-sample {positions}, which cuts the text into blocks"
    else:
        window_option = f" with --context-window {window}" if window else ""
        cause = f"--tokens-per-sample {block + window}{window_option} gives the model up to {longest} tokens at once"
        fix = f"pass --tokens-per-sample {positions} or less" + (" (and a --context-window below it)" if window else "")
    skipped = sizes > positions
    effect = (
        f"fairseq-eval-lm would skip the {int(skipped.sum())} of {len(sizes)} samples longer than that "
        f"({int(sizes[skipped].sum())} of its {int(sizes.sum())} tokens) and report the perplexity of the rest"
        if skipped.any()
        else "the model would read positions it was never trained on"
    )
    return f"{cause}, but the model has {positions} positions (--max-target-positions): {effect}; {fix}"


def checked_dataloader(dataloader: Callable) -> Callable:
    """``LanguageModelingTask.eval_lm_dataloader`` that refuses samples the model cannot read whole
    (fairseq skips them with a warning, or feeds context windows past the model's positions)."""
    signature = inspect.signature(dataloader)

    @functools.wraps(dataloader)
    def checked(self, *args, **kwargs):
        given = signature.bind(self, *args, **kwargs)
        given.apply_defaults()
        options = given.arguments
        positions = options["max_positions"]
        if isinstance(positions, int):
            sizes = np.asarray(options["dataset"].sizes)
            refusal = positions_refusal(sizes, self.args.tokens_per_sample, options["context_window"], positions)
            if refusal:
                raise ValueError(refusal)
        return dataloader(*given.args, **given.kwargs)

    return checked


class EvalLMInputs(FairseqFix):
    """fairseq-eval-lm skips the samples longer than the model's positions with a warning and reports
    the perplexity of the rest, exit 0 (30 of 1,950 tokens for --tokens-per-sample 64 on a model of
    32 positions); with --context-window it gives the model blocks plus context longer than its
    positions without a word. --context-window ≥ --tokens-per-sample ends in a ZeroDivisionError or
    negative dimensions; a translation checkpoint in an AttributeError about ``supported_targets`` or
    a dictionary error whose advice is wrong. The fix: ``fairseq_cli.eval_lm.main`` first refuses a
    checkpoint that is no language model (naming its task and fairseq-generate --score-reference) and
    a context window that leaves no token to score (with the arithmetic), and the task's
    ``eval_lm_dataloader`` refuses samples the model cannot read whole, naming both numbers and
    the fix. fairseq-eval-lm imports its module before it loads the plugin; in any other process
    there is no ``main`` to patch."""

    name = "eval_lm_inputs"
    patches = (
        "fairseq_cli.eval_lm.main",
        "fairseq.tasks.language_modeling.LanguageModelingTask.eval_lm_dataloader",
    )

    def apply(self) -> None:
        eval_lm = sys.modules.get("fairseq_cli.eval_lm")
        if eval_lm is not None:
            eval_lm.main = checked_main(eval_lm.main)
        LanguageModelingTask.eval_lm_dataloader = checked_dataloader(LanguageModelingTask.eval_lm_dataloader)
