"""Every method × field form × layer kind of the ODE LM builds from fairseq-train's command line,
trains two updates through fairseq's Trainer, and decodes (beam search and sampling)."""

from __future__ import annotations

import copy
import math
from typing import List

import pytest
import torch
from fairseq import search, tasks
from fairseq.sequence_generator import SequenceGenerator
from fairseq.trainer import Trainer

from ode_seq.fields import FIELD_FORMS
from ode_seq.solvers import TABLEAUS
from testkit.in_process import parse_training_args
from tests.lm.conftest import TINY_TIME, lm_training_args

KIND_ARCHITECTURES = {
    "standard": ("ode_transformer_lm", {}),
    "time-dependent": ("ode_transformer_lm_nonauto", TINY_TIME),
    "stable": ("stable_ode_transformer_lm", {}),
}
# Prompts of one length: fairseq's --min-len does not apply while any prompt of the batch is
# still being forced, so a shorter prompt could end at once.
PROMPTS = ["w1 w2 w3", "w7 w8 w9"]
DECODING = dict(min_len=5, max_len_b=8)


@pytest.fixture(scope="module")
def parsed(lm_data):
    """fairseq-train's configuration of each kind (parsed once: fairseq's parser takes a second)."""
    return {
        kind: parse_training_args(lm_training_args(lm_data, arch, options))
        for kind, (arch, options) in KIND_ARCHITECTURES.items()
    }


def train_two_updates(cfg) -> Trainer:
    task = tasks.setup_task(cfg.task)
    task.load_dataset(cfg.dataset.train_subset)
    trainer = Trainer(cfg, task, task.build_model(cfg.model), task.build_criterion(cfg.criterion))
    batches = trainer.get_train_iterator(epoch=1).next_epoch_itr(shuffle=False)
    for _ in range(2):
        output = trainer.train_step([next(batches)])
        assert math.isfinite(float(output["loss"]))
    assert trainer.get_num_updates() == 2
    return trainer


def continuations(task, model, prompts: List[str], **generator_options) -> List[dict]:
    """The best continuation of every prompt, as fairseq-interactive decodes language models."""
    d = task.source_dictionary
    tokens = [d.encode_line(p, add_if_not_exist=False, append_eos=False).long() for p in prompts]
    dataset = task.build_dataset_for_inference(tokens, [t.numel() for t in tokens])
    sample = dataset.collater([dataset[i] for i in range(len(tokens))])
    generator = SequenceGenerator([model], task.target_dictionary, **generator_options)
    return [hypotheses[0] for hypotheses in task.inference_step(generator, [model], sample)]


def assert_continues_prompts(task, hypotheses: List[dict]) -> None:
    """Every hypothesis is its prompt, at least one more token, and eos."""
    d = task.source_dictionary
    for prompt, hypothesis in zip(PROMPTS, hypotheses):
        prompt_tokens = d.encode_line(prompt, add_if_not_exist=False, append_eos=False).long()
        tokens = hypothesis["tokens"]
        assert torch.equal(tokens[: len(prompt_tokens)], prompt_tokens), d.string(tokens)
        assert len(tokens) > len(prompt_tokens) + 1 and tokens[-1] == d.eos()
        assert torch.isfinite(hypothesis["positional_scores"]).all()


@pytest.mark.parametrize("field", FIELD_FORMS)
@pytest.mark.parametrize("method", TABLEAUS)
@pytest.mark.parametrize("kind", KIND_ARCHITECTURES)
def test_every_method_field_and_kind_trains_and_decodes(parsed, kind, method, field):
    cfg = copy.deepcopy(parsed[kind])
    cfg.model.decoder_ode_method, cfg.model.ode_field = method, field
    trainer = train_two_updates(cfg)
    model, task = trainer.model.eval(), trainer.task
    assert [b.solver.method for b in model.decoder.layers] == [method] * len(model.decoder.layers)
    assert {b.field_form for b in model.decoder.layers} == {field}
    with torch.no_grad():
        assert_continues_prompts(task, continuations(task, model, PROMPTS, beam_size=2, **DECODING))
        torch.manual_seed(0)
        sampling = search.Sampling(task.target_dictionary, sampling_topk=5)
        sampled = continuations(task, model, PROMPTS, beam_size=1, search_strategy=sampling, **DECODING)
    assert_continues_prompts(task, sampled)
