"""Benchmark sizes and run options, with a tiny ``--smoke`` preset."""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass, field, fields, replace
from typing import Any, List, Optional, Sequence, Tuple

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORPUS_DIR = os.path.join(ROOT, "examples", "translation", "data")
DEFAULT_SECTIONS = ("training", "rk-overhead", "generation", "decoder-step")
LM_SECTIONS = ("lm-training", "lm-generation")
HF_SECTIONS = ("hf-training", "hf-decoding")
SECTIONS = DEFAULT_SECTIONS + ("compile",) + LM_SECTIONS + HF_SECTIONS
NOT_POSITIVE = ("vocab", "warmup", "seed")  # the whole-number settings that may be 0 (vocab: >= 16)


def smoke(default: Any, tiny: Any) -> Any:
    """A setting of ``default`` value whose ``--smoke`` value is ``tiny``."""
    return field(default=default, metadata={"smoke": tiny})


@dataclass(frozen=True)
class Settings:
    """Everything that sizes a run. Width d sets FFN = 4d and d/64 heads (at least 1)."""

    embed_dim: int = smoke(256, 32)
    layers: int = smoke(6, 2)
    rk_blocks: int = smoke(2, 1)
    source_len: int = smoke(32, 8)
    batch_tokens: int = smoke(2048, 64)
    vocab: int = smoke(8000, 200)
    gen_sentences: int = smoke(16, 2)
    gen_max_len: int = smoke(32, 12)
    beam: int = 4
    step_sentences: int = smoke(16, 2)
    step_prefixes: Tuple[int, int] = smoke((8, 64), (2, 8))
    lm_sample_len: int = smoke(128, 16)
    lm_prompt_len: int = smoke(8, 2)
    hf_layers: int = smoke(2, 1)
    hf_seq_len: int = smoke(128, 8)
    hf_batch: int = smoke(8, 2)
    hf_prompt_len: int = smoke(32, 4)
    hf_new_tokens: int = smoke(32, 3)
    hf_vocab: int = smoke(1000, 64)
    rounds: int = smoke(4, 3)
    warmup: int = 1
    train_iters: int = 1
    gen_iters: int = 1
    step_iters: int = smoke(50, 3)
    threads: int = smoke(2, 1)
    device: str = "cpu"
    dtype: str = "float32"
    clock: str = "wall"
    seed: int = 0
    data_dir: str = CORPUS_DIR
    sections: Tuple[str, ...] = DEFAULT_SECTIONS

    @property
    def ffn_dim(self) -> int:
        return 4 * self.embed_dim

    @property
    def heads(self) -> int:
        return max(1, self.embed_dim // 64)

    @property
    def batch_sentences(self) -> int:
        return max(1, self.batch_tokens // self.source_len)

    @property
    def lm_blocks(self) -> int:
        """Language-model blocks of ``lm_sample_len`` tokens in a training batch."""
        return max(1, self.batch_tokens // self.lm_sample_len)


# The tiny ``--smoke`` preset: each setting's ``smoke`` value (the others keep their defaults).
SMOKE = {f.name: f.metadata["smoke"] for f in fields(Settings) if "smoke" in f.metadata}


def parse_settings(argv: Optional[Sequence[str]] = None) -> Tuple[Settings, argparse.Namespace]:
    """Settings from the command line; ``--smoke`` starts from the tiny preset."""
    defaults = Settings()
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.run",
        description="Ratios of fairseq's pre-norm transformer and ode_transformer, one process, "
        "same batches, interleaved repetitions, medians.",
    )
    parser.add_argument("--smoke", action="store_true", help="tiny sizes that run every section in seconds (for tests)")
    for f in fields(Settings):
        if f.name in ("step_prefixes", "sections"):
            continue
        flag = "--" + f.name.replace("_", "-")
        kind = type(f.default)
        if f.name == "device":
            parser.add_argument(flag, choices=("cpu", "cuda"), help="default: cpu")
        elif f.name == "clock":
            parser.add_argument(
                flag,
                choices=("wall", "cpu"),
                help="wall time, or process CPU time (cpu device; robust on a "
                "machine shared with other jobs) (default: wall)",
            )
        elif f.name == "dtype":
            parser.add_argument(
                flag, choices=("float32", "bfloat16"), help="autocast dtype (default: float32 on cpu, bfloat16 on cuda)"
            )
        else:
            parser.add_argument(flag, type=kind, help=f"default: {f.default}")
    parser.add_argument(
        "--step-prefixes",
        type=int,
        nargs=2,
        metavar=("SHORT", "LONG"),
        help=f"decoder-step prefix lengths (default: {defaults.step_prefixes})",
    )
    parser.add_argument(
        "--sections", nargs="+", choices=SECTIONS, help="sections to run (default: all but compile, lm-* and hf-*)"
    )
    parser.add_argument("--json", metavar="FILE", help="also write the rows as JSON to FILE")
    args = parser.parse_args(argv)

    settings = replace(defaults, **SMOKE) if args.smoke else defaults
    given = {f.name: getattr(args, f.name) for f in fields(Settings) if getattr(args, f.name, None) is not None}
    if "step_prefixes" in given:
        given["step_prefixes"] = tuple(given["step_prefixes"])
    if "sections" in given:
        given["sections"] = tuple(given["sections"])
    if given.get("device") == "cuda" and "dtype" not in given:
        given["dtype"] = "bfloat16"
    settings = replace(settings, **given)
    _validate(settings, parser)
    return settings, args


def _validate(settings: Settings, parser: argparse.ArgumentParser) -> None:
    problems: List[str] = []
    if settings.device == "cuda":
        import torch

        if not torch.cuda.is_available():
            problems.append("--device cuda but torch sees no CUDA device; use --device cpu")
        if settings.clock == "cpu":
            problems.append("--clock cpu does not see GPU work; use --clock wall with cuda")
    short, long = settings.step_prefixes
    if not 0 < short < long:
        problems.append(f"--step-prefixes needs 0 < SHORT < LONG, got {short} {long}")
    for f in fields(Settings):
        if f.name not in NOT_POSITIVE and f.type == "int" and getattr(settings, f.name) < 1:
            problems.append(f"--{f.name.replace('_', '-')} must be >= 1")
    if settings.vocab < 16:
        problems.append("--vocab must be >= 16")
    if problems:
        parser.error("; ".join(problems))
