"""ODE language models that are not plain Transformers in Hugging Face: the saved folder, loaded
with ``AutoModelForCausalLM`` and ``trust_remote_code=True``, gives fairseq's log-probabilities,
decodes token by token as in the teacher-forced pass (one cache per block, step and stage, the
corrector's evaluation of PCformer's blocks among them), and ``generate()`` gives fairseq's
hypotheses; what the remote code cannot run is refused by name."""

import pytest
import torch

from ode_seq.export import NotRepresentable
from ode_seq.export.ode_xglm import save
from tests.conftest import TinyTask
from tests.export.models import (
    assert_carries_ode_seqs_files_unchanged,
    assert_generate_gives_fairseqs_hypotheses,
    end_sentences_early,
    greedy_stepwise,
    model_and_args,
    randomize_parameters,
)
from tests.lm.conftest import TINY_LM, TINY_TIME
from tests.numerics import LayerEvaluations, assert_equal_up_to_rounding


def _saved(tmp_path, monkeypatch, arch, end_early=None, **options):
    """(the fairseq LM with trained-looking solver weights, the folder's model loaded by
    transformers); ``end_early``: the options of :func:`~tests.export.models.end_sentences_early`,
    if given."""
    from transformers import AutoModelForCausalLM

    monkeypatch.setenv("HF_MODULES_CACHE", str(tmp_path / "modules"))
    task = TinyTask()
    model, args = model_and_args(arch, task, **{**TINY_LM, **options})
    randomize_parameters(model, solver_weights=True)
    if end_early is not None:
        end_sentences_early(model, **end_early)
    save(model, args, task.target_dictionary, None, str(tmp_path / "hf"))
    return model, AutoModelForCausalLM.from_pretrained(str(tmp_path / "hf"), trust_remote_code=True).eval()


# PCformer's blocks with a Heun predictor, the corrector over this and 1 earlier step, one layer
# shared over [0, 2] in 3 steps (the history runs over the steps of the group).
PC_GROUP = dict(
    decoder_ode_method="heun", decoder_ode_corrector_history=1, decoder_share_group_size=2, decoder_ode_steps=3
)


def _tokens(batch, length, seed=0):
    tokens = torch.randint(4, 34, (batch, length), generator=torch.Generator().manual_seed(seed))
    tokens[:, 0] = 2
    return tokens


@pytest.mark.numerics
@pytest.mark.parametrize(
    "arch, options",
    [
        ("ode_transformer_lm_rk2_learned", {}),  # the paper's RK2 with the learned gate
        ("ode_transformer_lm_rk4", dict(decoder_share_group_size=2, decoder_ode_steps=3, ode_coefficients="ema")),
        ("ode_transformer_lm_rk2_learned", dict(ode_coefficients="learned-shared")),
        ("ode_transformer_lm_parallel", {}),  # Euler on the parallel-branch field
        ("ode_transformer_lm_rk2", dict(ode_field="whole-layer")),
        # Euler of step size 2/3 on whole blocks: no Transformer layer, but the remote code runs it
        ("ode_transformer_lm_euler", dict(decoder_share_group_size=2, decoder_ode_steps=3)),
        ("ode_transformer_lm_pcformer", {}),  # RK4-EMA predictor, multistep corrector over m = 3 steps
        ("ode_transformer_lm_pcformer", PC_GROUP),
    ],
)
def test_saved_folder_gives_fairseqs_log_probabilities(tmp_path, monkeypatch, arch, options):
    model, hf = _saved(tmp_path, monkeypatch, arch, **options)
    assert type(hf).__name__ == "ODEXGLMForCausalLM"
    tokens = _tokens(3, 9)
    with torch.no_grad():
        with LayerEvaluations(model) as evaluations:  # the remote code's evaluations, counted on fairseq's
            expected = model.get_normalized_probs(model(tokens), log_probs=True)
        got = hf(input_ids=tokens).logits.log_softmax(-1)
    assert_equal_up_to_rounding(got, expected, evaluations.count)


@pytest.mark.numerics
@pytest.mark.parametrize(
    "arch, options",
    [
        ("ode_transformer_lm_rk4", dict(decoder_share_group_size=2, decoder_ode_steps=2)),
        ("ode_transformer_lm_pcformer", PC_GROUP),  # one cache per evaluation: 2 stages + the corrector
    ],
)
def test_decodes_token_by_token_as_the_teacher_forced_pass(tmp_path, monkeypatch, arch, options):
    model, hf = _saved(tmp_path, monkeypatch, arch, **options)
    start = _tokens(2, 3)
    with torch.no_grad():
        sequences, stepwise = greedy_stepwise(hf, 6, input_ids=start)
        full = hf(input_ids=sequences[:, :-1]).logits[:, start.size(1) - 1 :].log_softmax(-1)
        with LayerEvaluations(model) as evaluations:  # those of the full pass, counted on fairseq's model
            model(sequences[:, :-1])
    assert_equal_up_to_rounding(stepwise, full, evaluations.count)


@pytest.mark.parametrize(
    "prompt, beam, lenpen",
    [([], 1, 1.0), ([], 4, 1.0), ([], 4, 0.6), ([5, 9, 7], 1, 1.0), ([5, 9, 7], 4, 0.0)],
)
def test_generate_gives_fairseqs_hypotheses(tmp_path, monkeypatch, prompt, beam, lenpen):
    model, hf = _saved(tmp_path, monkeypatch, "ode_transformer_lm_rk2_learned", end_early={})
    assert_generate_gives_fairseqs_hypotheses(model, hf, prompt, beam, lenpen)


@pytest.mark.parametrize("prompt, beam, lenpen", [([], 1, 1.0), ([], 4, 0.6), ([5, 9, 7], 4, 0.0)])
def test_predictor_corrector_lm_generates_fairseqs_hypotheses(tmp_path, monkeypatch, prompt, beam, lenpen):
    # </s> made likely enough that the hypotheses end within the cap, greedy's after 7 tokens
    end_early = dict(strength=0.6, seed=0)
    model, hf = _saved(tmp_path, monkeypatch, "ode_transformer_lm_pcformer", end_early=end_early, **PC_GROUP)
    assert_generate_gives_fairseqs_hypotheses(model, hf, prompt, beam, lenpen)


@pytest.mark.numerics
def test_left_padded_prompts_decode_as_each_alone(tmp_path, monkeypatch):
    """A batch of prompts of different lengths, left-padded with an attention mask, gives every
    prompt the log-probabilities it gets alone, at every step of greedy decoding."""
    model, hf = _saved(tmp_path, monkeypatch, "ode_transformer_lm_rk2_learned")
    prompts = [[2, 5], [2, 5, 9, 7]]
    batch = torch.tensor([[1, 1, *prompts[0]], prompts[1]])

    with torch.no_grad():
        _, together = greedy_stepwise(hf, 4, input_ids=batch, attention_mask=batch.ne(1).long())
        with LayerEvaluations(model) as evaluations:  # one full pass over the longest sequence
            model(torch.tensor([prompts[1] + [5] * 4]))
        for row, prompt in enumerate(prompts):
            _, alone = greedy_stepwise(hf, 4, input_ids=torch.tensor([prompt]))
            assert_equal_up_to_rounding(together[row], alone[0], evaluations.count)


def test_folder_carries_the_solver_core_and_the_layer_field_unchanged(tmp_path, monkeypatch):
    _saved(tmp_path, monkeypatch, "ode_transformer_lm_rk2_learned")
    assert_carries_ode_seqs_files_unchanged(tmp_path / "hf")


@pytest.mark.parametrize(
    "arch, options, refusal",
    [
        ("ode_transformer_lm_nonauto", dict(TINY_TIME, decoder_ode_method="heun"), r"time-dependent layers"),
        ("stable_ode_transformer_lm", {}, r"stable layers"),
        ("ode_transformer_lm_rk2", dict(decoder_relative_positions=4), r"--decoder-relative-positions 4"),
        ("ode_transformer_lm_rk2", dict(decoder_layer_history="dense"), r"--decoder-layer-history"),
        ("ode_transformer_lm_rk2", dict(ode_scope="sublayer"), r"--ode-scope sublayer"),
        ("ode_transformer_lm_pcformer", dict(decoder_layer_history="dense"), r"--decoder-layer-history"),
        ("ode_transformer_lm_rk2", dict(no_decoder_final_norm=True), r"--no-decoder-final-norm"),
    ],
)
def test_what_the_remote_code_cannot_run_is_refused_naming_the_option(tmp_path, arch, options, refusal):
    task = TinyTask()
    model, args = model_and_args(arch, task, **{**TINY_LM, **options})
    with pytest.raises(NotRepresentable, match=refusal):
        save(model, args, task.target_dictionary, None, str(tmp_path / "hf"))
    assert not (tmp_path / "hf").exists()
