"""A fairseq model from its architecture name (and a criterion from its name), built as fairseq-train
builds it but without a data directory: for the tests, the benchmarks and the GPU checks.

    task = DictionaryTask(word_dictionary(30))
    model = build_model("ode_transformer_rk4", task, seed=0, encoder_layers=2, encoder_ode_method="heun")
    src_tokens, src_lengths, prev_output_tokens = random_batch(task, [7, 5, 9])

``options`` are command-line values under their argparse names; the architecture fills in every
option not given, as ``--arch`` does, and values given win over its defaults.
"""

from __future__ import annotations

import argparse
from typing import Any, Dict, Sequence, Tuple

import torch
from fairseq.criterions import CRITERION_DATACLASS_REGISTRY, CRITERION_REGISTRY, FairseqCriterion
from fairseq.data import Dictionary
from fairseq.dataclass.utils import gen_parser_from_dataclass
from fairseq.models import (
    ARCH_CONFIG_REGISTRY,
    ARCH_MODEL_NAME_REGISTRY,
    ARCH_MODEL_REGISTRY,
    MODEL_DATACLASS_REGISTRY,
    BaseFairseqModel,
)


def word_dictionary(words: int) -> Dictionary:
    """fairseq's dictionary of its four special symbols and ``words`` words w0, w1, …"""
    dictionary = Dictionary()
    for i in range(words):
        dictionary.add_symbol(f"w{i}")
    return dictionary


class DictionaryTask:
    """The two dictionaries fairseq's ``build_model`` reads from a task (here one, shared)."""

    def __init__(self, dictionary: Dictionary) -> None:
        self.source_dictionary = self.target_dictionary = dictionary


def dataclass_defaults(arch: str) -> Dict[str, Any]:
    """The option defaults that ``arch``'s model declares in a dataclass (fairseq's
    ``transformer_lm``), as fairseq-train's parser sets them before the architecture function
    runs; none for a model that declares its options with ``add_args``."""
    dataclass = MODEL_DATACLASS_REGISTRY.get(ARCH_MODEL_NAME_REGISTRY[arch])
    if dataclass is None:
        return {}
    parser = argparse.ArgumentParser()
    gen_parser_from_dataclass(parser, dataclass())
    return vars(parser.parse_args([]))


def architecture_options(arch: str, **options: Any) -> argparse.Namespace:
    """The options of ``--arch arch`` given ``options`` (``arch`` among them): the model's
    dataclass defaults and the architecture's defaults fill in the rest."""
    if arch not in ARCH_CONFIG_REGISTRY:
        raise ValueError(f"unknown architecture '{arch}': import user_dir (or ode_seq.models) to register ode-seq's")
    args = argparse.Namespace(**{**dataclass_defaults(arch), **options, "arch": arch})
    ARCH_CONFIG_REGISTRY[arch](args)
    return args


def model_and_options(
    arch: str, task: Any, seed: int = 0, **options: Any
) -> Tuple[BaseFairseqModel, argparse.Namespace]:
    """fairseq model ``arch`` with ``options``, its parameters initialised under ``torch.manual_seed(seed)``,
    in fp32 on the CPU; and the options as the model's ``build_model`` left them (what an export reads)."""
    args = architecture_options(arch, **options)
    torch.manual_seed(seed)
    return ARCH_MODEL_REGISTRY[arch].build_model(args, task), args


def build_model(arch: str, task: Any, seed: int = 0, **options: Any) -> BaseFairseqModel:
    """The model of :func:`model_and_options`."""
    return model_and_options(arch, task, seed, **options)[0]


def build_criterion(name: str, task: Any, **options: Any) -> FairseqCriterion:
    """Criterion ``name`` as ``--criterion name`` builds it: ``options`` set fields of its dataclass,
    the others keep their defaults; the loss is averaged over tokens (fairseq's default)."""
    cfg = CRITERION_DATACLASS_REGISTRY[name](**{"sentence_avg": False, **options})
    return CRITERION_REGISTRY[name].build_criterion(cfg, task)


def random_batch(
    task: Any, lengths: Sequence[int], seed: int = 0, device: str = "cpu"
) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(src_tokens, src_lengths, prev_output_tokens) of random words, sources left-padded and target
    prefixes (</s>, then the words) right-padded, as fairseq batches them."""
    g = torch.Generator().manual_seed(seed)
    d = task.source_dictionary
    bsz, longest = len(lengths), max(lengths)
    src = torch.full((bsz, longest), d.pad())
    prev = torch.full((bsz, longest + 1), d.pad())
    for i, n in enumerate(lengths):
        src[i, longest - n :] = torch.randint(d.nspecial, len(d), (n,), generator=g)
        prev[i, 0] = d.eos()
        prev[i, 1 : n + 1] = torch.randint(d.nspecial, len(d), (n,), generator=g)
    return src.to(device), torch.tensor(lengths, device=device), prev.to(device)


def transformer_sizes(embed_dim: int, heads: int) -> Dict[str, int]:
    """Width options of an encoder-decoder transformer, the same on both sides: model dimension
    d = ``embed_dim``, FFN dimension 4d, ``heads`` attention heads."""
    return dict(
        encoder_embed_dim=embed_dim,
        decoder_embed_dim=embed_dim,
        encoder_ffn_embed_dim=4 * embed_dim,
        decoder_ffn_embed_dim=4 * embed_dim,
        encoder_attention_heads=heads,
        decoder_attention_heads=heads,
    )
