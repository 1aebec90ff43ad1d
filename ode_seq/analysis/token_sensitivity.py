"""Token-level Lyapunov exponents of a translation model on one sentence pair, or of a language
model on one context.

The maps are the solver steps of the stacks: x^{n+1} = Φ_n(x^n) on the source states (T_src, d)
for the encoder; for the decoder under teacher forcing on the target prefix (T_tgt, d) with the
causal mask, the encoder output held fixed; for a language model's decoder on its context
(T, d), causal mask. A fixed-grid block of N steps is N maps of time step h (a non-autonomous
stack is N maps with weights θ(t_n)); an adaptive block and a plain fairseq
layer are one map over their interval. Each layer's call is captured (arguments included) during
one forward pass and replayed on perturbed states, so the maps are exactly the model's.

A stack of predictor–corrector blocks in the paper's multistep form carries the first-stage values
of its last m steps, so its maps act on that state, z_n = [y_n, k_1^{(n−1)}, …, k_1^{(n−m)}]
(T, (m + 1) d), and the exponents are the augmented state's. Stacks whose state is every earlier
block output (layer history, DLCL; the public code's DLCL corrector) are skipped.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Tuple, Union

import numpy as np
import torch
from torch import Tensor, nn

from ode_seq.layers.blocks import ODEBlock
from ode_seq.layers.layer_history import HistoryBlock
from ode_seq.model_inputs import ModelPass, language_model_pass, model_stacks, translation_pass
from ode_seq.solvers import FixedGridSolver, PredictorCorrectorSolver

from .layer_weights import stack_layers
from .lyapunov import TokenLyapunov, token_lyapunov_exponents

BlockCall = Tuple[nn.Module, tuple, dict]


@dataclass
class StackSensitivity:
    """Token labels and exponents of one stack, or the reason it was skipped."""

    tokens: List[str]
    result: Optional[TokenLyapunov] = None
    skipped: Optional[str] = None


def capture_calls(model: nn.Module, model_pass: ModelPass) -> Dict[str, List[BlockCall]]:
    """Run ``model_pass`` once and record each layer's (layer, args, kwargs), per stack."""
    calls: Dict[str, List[BlockCall]] = {side: [] for side in model_stacks(model)}
    handles = []
    for side in calls:
        for layer in stack_layers(getattr(model, side)):

            def hook(module, args, kwargs, side=side):
                calls[side].append((module, args, kwargs))

            handles.append(layer.register_forward_pre_hook(hook, with_kwargs=True))
    try:
        with torch.no_grad():
            model(*model_pass.args)
    finally:
        for handle in handles:
            handle.remove()
    return calls


def capture_block_calls(
    model: nn.Module,
    src_tokens: Tensor,
    prev_output_tokens: Tensor,
    src_lengths: Optional[Tensor] = None,
) -> Dict[str, List[BlockCall]]:
    """:func:`capture_calls` of a translation model; ``src_lengths`` defaults to the full length
    of every row (a batch of one)."""
    return capture_calls(model, translation_pass(src_tokens, prev_output_tokens, src_lengths))


def block_map(layer: nn.Module, args: tuple, kwargs: dict) -> Callable[[Tensor], Tensor]:
    """x (T, d) ↦ the layer's output for a batch of one, other inputs as captured.

    The class's forward is called directly, bypassing wrappers patched onto the instance
    (activation checkpointing), so autograd sees the plain computation.
    """
    forward = type(layer).forward

    def f(x: Tensor) -> Tensor:
        out = forward(layer, x.unsqueeze(1), *args[1:], **kwargs)
        return (out[0] if isinstance(out, tuple) else out).squeeze(1)

    return f


def step_maps(layer: nn.Module, args: tuple, kwargs: dict) -> List[Tuple[Callable[[Tensor], Tensor], float]]:
    """(map, time step) for each solver step of a fixed-grid block, else the whole layer's call."""
    solver = getattr(layer, "solver", None)
    if not isinstance(layer, ODEBlock) or not isinstance(solver, FixedGridSolver):
        return [(block_map(layer, args, kwargs), solver.interval if solver is not None else 1.0)]

    def batch_of_one(step: Callable[[Tensor], Tensor]) -> Callable[[Tensor], Tensor]:
        return lambda x: step(x.unsqueeze(1)).squeeze(1)

    return [(batch_of_one(layer.step_map(n, *args[1:], **kwargs)), solver.step_size) for n in range(solver.steps)]


def multistep_maps(calls: List[BlockCall]) -> List[Tuple[Callable[[Tensor], Tensor], float]]:
    """(map, time step) for each step of a stack of multistep predictor–corrector blocks, in order:
    z_n ↦ z_{n+1} on the augmented state z_n = [y_n, k_1^{(n−1)}, …, k_1^{(n−m)}] (T, (m + 1) d)
    of a batch of one. Slots before the stack's first step are unused (the corrector repeats its
    oldest value there)."""
    maps = []
    for layer, args, kwargs in calls:
        solver, field = layer.solver, layer.vector_field(*args[1:], **kwargs)
        for n in range(solver.steps):
            maps.append((_multistep_map(solver, field, n, known=len(maps)), solver.step_size))
    return maps


def _multistep_map(solver: PredictorCorrectorSolver, field, step: int, known: int) -> Callable[[Tensor], Tensor]:
    """z_n ↦ z_{n+1} for ``step`` of ``solver``, reading ``known`` earlier first-stage values."""
    m = solver.history_length

    def f(z: Tensor) -> Tensor:
        y, *earlier = z.unsqueeze(1).chunk(m + 1, dim=-1)
        y_next, first_stages = solver.multistep_step(field, y, earlier[:known], step)
        return torch.cat([y_next, *first_stages[:m]], dim=-1).squeeze(1)

    return f


def multistep_start(stack_input: Tensor, calls: List[BlockCall]) -> Tensor:
    """z_0 = [y_0, 0, …, 0]: the stack's input and its m unused history slots."""
    m = calls[0][0].solver.history_length
    return torch.cat([stack_input] + [torch.zeros_like(stack_input)] * m, dim=-1)


NOT_ONE_BLOCK = "so the state is not one block's output and the per-block QR propagation does not apply"


def stack_sensitivity(
    stack: nn.Module, calls: List[BlockCall], tokens: List[str], num_exponents: Optional[int]
) -> StackSensitivity:
    """Exponents of the last position with respect to every token along the stack's blocks."""
    if any(isinstance(m, HistoryBlock) for m in stack.modules()):
        return StackSensitivity(
            tokens,
            skipped=f"layer history (DLCL): a block's input mixes all previous outputs, {NOT_ONE_BLOCK}",
        )
    solvers = [getattr(m, "solver", None) for m in stack.modules()]
    corrected = [s for s in solvers if isinstance(s, PredictorCorrectorSolver)]
    if any(s.form == "dlcl" for s in corrected):
        return StackSensitivity(
            tokens,
            skipped=f"the DLCL corrector (--*-ode-corrector dlcl) mixes all previous outputs, {NOT_ONE_BLOCK}",
        )
    if not calls:
        return StackSensitivity(tokens, skipped="the stack has no layers")
    x0 = calls[0][1][0].squeeze(1).detach()
    if corrected:
        steps, x0 = multistep_maps(calls), multistep_start(x0, calls)
    else:
        steps = [step for call in calls for step in step_maps(*call)]
    return StackSensitivity(
        tokens,
        token_lyapunov_exponents(
            [f for f, _ in steps],
            x0,
            position=-1,
            dt=sum(dt for _, dt in steps) / len(steps),
            num_exponents=num_exponents,
        ),
    )


def greedy_target(model: nn.Module, source: Tensor, eos: int, max_len: int) -> Tensor:
    """Greedy translation of ``source`` (1-D, ending with EOS), without the final EOS.

    The decoder re-runs on the whole prefix at every step (no incremental state).
    """
    prefix = torch.tensor([[eos]])
    with torch.no_grad():
        encoder_out = model.encoder(source[None], torch.tensor([source.numel()]))
        for _ in range(max_len):
            logits, _ = model.decoder(prefix, encoder_out=encoder_out)
            token = int(logits[0, -1].argmax())
            if token == eos:
                break
            prefix = torch.cat([prefix, torch.tensor([[token]])], dim=1)
    return prefix[0, 1:]


def sentence_sensitivity(
    model: nn.Module,
    source: Tensor,
    target: Tensor,
    token_string: Callable[[int, str], str],
    num_exponents: Optional[int] = None,
) -> Dict[str, StackSensitivity]:
    """Encoder exponents over source tokens; decoder exponents over the teacher-forced prefix.

    ``source`` ends with EOS; ``target`` is the target sentence without EOS, fed as
    prev_output_tokens = [EOS] + target. ``token_string(index, side)`` names a token.
    """
    eos = source[-1].item()
    prev_output_tokens = torch.cat([source.new_tensor([eos]), target])
    calls = capture_block_calls(model, source[None], prev_output_tokens[None])
    labels: Dict[str, List[str]] = {
        "encoder": [token_string(int(t), "source") for t in source],
        "decoder": [token_string(int(t), "target") for t in prev_output_tokens],
    }
    return {
        side: stack_sensitivity(getattr(model, side), calls[side], labels[side], num_exponents)
        for side in ("encoder", "decoder")
    }


def context_sensitivity(
    model: nn.Module,
    tokens: Tensor,
    token_string: Callable[[int, str], str],
    num_exponents: Optional[int] = None,
) -> Dict[str, StackSensitivity]:
    """A language model's exponents of the last position of ``tokens`` (1-D: the context as the
    model reads it, beginning-of-sentence symbol first) with respect to every token of it, along
    the decoder's blocks (the paper's LM analysis)."""
    calls = capture_calls(model, language_model_pass(tokens[None]))
    labels = [token_string(int(t), "target") for t in tokens]
    return {"decoder": stack_sensitivity(model.decoder, calls["decoder"], labels, num_exponents)}


SensitivityJSON = Dict[str, Union[str, int, List[str], List[float], List[List[float]]]]
LEADING_EXPONENTS = 8


def sensitivity_json(sensitivity: StackSensitivity) -> SensitivityJSON:
    """Tokens, per-token scores (max exponent), running maxima by solver step, leading exponents."""
    if sensitivity.result is None:
        return {"tokens": sensitivity.tokens, "skipped": sensitivity.skipped or ""}
    result = sensitivity.result
    leading = -np.sort(-result.exponents, axis=1)[:, :LEADING_EXPONENTS]
    return {
        "tokens": sensitivity.tokens,
        "position": len(sensitivity.tokens) - 1,
        "scores": result.scores.tolist(),
        "running_max_by_step": result.running_max.tolist(),
        "leading_exponents": leading.tolist(),
    }
