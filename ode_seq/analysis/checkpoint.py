"""Loading a trained model, its task and analysis inputs the way fairseq's tools do.

The plugin directory is imported first (``--user-dir`` semantics), which registers the models
and allow-lists the types fairseq pickles (:mod:`ode_seq.checkpoint_files`); fairseq then
loads the checkpoint with torch's ``weights_only`` unpickler, so no pickled code can run.
"""

from __future__ import annotations

import argparse
import os
from typing import Any, Dict, Optional, Tuple

import torch
from fairseq import checkpoint_utils, utils
from torch import Tensor, nn

from ode_seq.checkpoint_files import allow_fairseq_checkpoint_types


def load_model(
    path: str, data: str, user_dir: str, overrides: Optional[Dict[str, Any]] = None
) -> Tuple[nn.Module, object]:
    """(model in eval mode on CPU, task); ``data`` replaces the checkpoint's stored data path,
    ``overrides`` other model options (fairseq's ``--model-overrides``)."""
    for option, value in (("--path", path), ("--data", data), ("--user-dir", user_dir)):
        if not os.path.exists(value):
            raise FileNotFoundError(f"{option} {value} does not exist")
    utils.import_user_module(argparse.Namespace(user_dir=user_dir))
    allow_fairseq_checkpoint_types()
    models, _, task = checkpoint_utils.load_model_ensemble_and_task(
        [path], arg_overrides={"data": data, **(overrides or {})}
    )
    return models[0].float().eval(), task


def validation_batch(task, subset: str, max_sentences: int) -> Dict[str, object]:
    """fairseq's collated batch of the first ``max_sentences`` sentences of ``subset``."""
    task.load_dataset(subset)
    dataset = task.dataset(subset)
    if len(dataset) == 0:
        raise ValueError(f"subset {subset!r} of the data directory is empty")
    count = min(max_sentences, len(dataset))
    return dataset.collater([dataset[i] for i in range(count)])


def first_pair(task, subset: str) -> Tuple[Tensor, Tensor]:
    """(source with EOS, target without EOS) of the first sentence pair of ``subset``."""
    sample = task.dataset(subset)[0]
    return sample["source"], sample["target"][:-1]


def context_start(task) -> int:
    """The symbol a language model's context begins with: bos with --add-bos-token, else eos (as
    fairseq's language_modeling task prepends to a prompt)."""
    d = task.source_dictionary
    return d.bos() if getattr(task.cfg, "add_bos_token", False) else d.eos()


def first_context(task, subset: str) -> Tensor:
    """The first line of ``subset`` as a language model reads it: the start symbol, then the
    line's tokens (those of the dataset's first sample up to its first end of sentence)."""
    tokens = task.dataset(subset)[0]["source"]
    start, eos = context_start(task), task.source_dictionary.eos()
    if tokens.numel() and tokens[0] == start:
        tokens = tokens[1:]
    ends = tokens.eq(eos).nonzero()
    line = tokens[: int(ends[0])] if len(ends) else tokens
    return torch.cat([line.new_tensor([start]), line])


def encode_context(task, sentence: str) -> Tensor:
    """A language model's context for an already tokenised sentence: start symbol, tokens."""
    ids = task.source_dictionary.encode_line(sentence, add_if_not_exist=False, append_eos=False).long()
    return torch.cat([ids.new_tensor([context_start(task)]), ids])


def encode_sentence(task, sentence: str, side: str) -> Tensor:
    """Token ids of an already tokenised (BPE-applied) sentence; source sentences end with EOS."""
    dictionary = task.source_dictionary if side == "source" else task.target_dictionary
    ids = dictionary.encode_line(sentence, add_if_not_exist=False, append_eos=side == "source")
    return ids.long()


def unknown_count(task, ids: Tensor, side: str) -> int:
    dictionary = task.source_dictionary if side == "source" else task.target_dictionary
    return int(ids.eq(dictionary.unk()).sum())


def token_namer(task):
    """token_string(index, side) for the source or target dictionary."""

    def name(index: int, side: str) -> str:
        dictionary = task.source_dictionary if side == "source" else task.target_dictionary
        return dictionary[index]

    return name


def parameter_count(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())
