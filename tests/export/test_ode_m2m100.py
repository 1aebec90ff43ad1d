"""ODE Transformers with Runge–Kutta blocks in Hugging Face: the saved folder, loaded with
``trust_remote_code=True``, gives fairseq's log-probabilities, and its decoder blocks decode token
by token as in the teacher-forced pass (one cache per step and stage); PCformer's
predictor–corrector blocks too, whose ``generate()`` gives fairseq's hypotheses."""

import pytest
import torch
from fairseq.sequence_generator import SequenceGenerator

from ode_seq.export import NotRepresentable
from ode_seq.export.ode_m2m100 import has_rk_stack, save
from tests.conftest import TinyTask, random_batch
from tests.export.models import (
    assert_carries_ode_seqs_files_unchanged,
    end_sentences_early,
    greedy_stepwise,
    log_probs,
    model_and_args,
    randomize_parameters,
    scored_search,
)
from tests.numerics import LayerEvaluations, assert_equal_up_to_rounding, score_tolerance

SHARED = dict(share_all_embeddings=True)
# Predictor–corrector decoder blocks: a Heun predictor, the corrector over this and 1 earlier step,
# one layer shared over [0, 2] in 3 steps (the history runs over the steps of the group).
PC_DECODER = dict(
    decoder_ode_method="heun",
    decoder_ode_corrector="multistep",
    decoder_ode_corrector_history=1,
    decoder_share_group_size=2,
    decoder_ode_steps=3,
)


def _right_padded(src, lengths, pad):
    right = torch.full_like(src, pad)
    for row, n in enumerate(lengths.tolist()):
        right[row, :n] = src[row, src.size(1) - n :]
    return right


@pytest.mark.numerics
@pytest.mark.parametrize(
    "arch, options",
    [
        ("ode_transformer_rk2_learned_small", {}),  # the paper's RK2 with the learned gate
        ("ode_transformer_rk4_small", dict(encoder_share_group_size=2, encoder_ode_steps=3)),
        ("ode_transformer_rk4_small", dict(ode_coefficients="ema")),
        ("ode_transformer_rk2_learned_small", dict(ode_coefficients="learned-shared")),
        ("ode_transformer_rk4_encdec_small", {}),  # RK4 decoder blocks
        # RK2 decoder with the learned gate, one layer shared over [0, 2] in 3 steps
        (
            "ode_transformer_rk2_learned_small",
            dict(decoder_ode_method="heun", decoder_share_group_size=2, decoder_ode_steps=3),
        ),
        ("pcformer_small", {}),  # the paper's: RK4-EMA predictor, multistep corrector over m = 3 steps
        ("pcformer_small", dict(encoder_ode_corrector="dlcl")),  # the public code's corrector
        ("pcformer_small", dict(encoder_ode_method="euler", ode_coefficients="fixed", encoder_ode_corrector_history=1)),
        ("pcformer_small", PC_DECODER),
    ],
)
def test_saved_folder_with_remote_code_gives_fairseqs_log_probabilities(tmp_path, monkeypatch, arch, options):
    from transformers import AutoModelForSeq2SeqLM

    monkeypatch.setenv("HF_MODULES_CACHE", str(tmp_path / "modules"))
    task = TinyTask()
    model, args = model_and_args(arch, task, **SHARED, **options)
    randomize_parameters(model, solver_weights=True)
    assert has_rk_stack(model)
    save(model, args, task.source_dictionary, task.target_dictionary, None, str(tmp_path / "hf"))
    hf = AutoModelForSeq2SeqLM.from_pretrained(str(tmp_path / "hf"), trust_remote_code=True).eval()
    assert type(hf).__name__ == "ODEM2M100ForConditionalGeneration"
    src, lengths, prev = random_batch(task, [6, 4, 7, 1])
    pad = task.source_dictionary.pad()
    right = _right_padded(src, lengths, pad)
    with torch.no_grad(), LayerEvaluations(hf) as evaluations:
        got = hf(input_ids=right, attention_mask=right.ne(pad).long(), decoder_input_ids=prev).logits.log_softmax(-1)
    mask = prev.ne(pad)
    assert_equal_up_to_rounding(got[mask], log_probs(model, (src, lengths, prev))[mask], evaluations.count)


def _saved_model(tmp_path, monkeypatch, arch, end_early=None, **options):
    """(task, the fairseq model with trained-looking solver weights, the folder's model loaded by
    transformers); ``end_early``: the options of :func:`~tests.export.models.end_sentences_early`,
    if given."""
    from transformers import AutoModelForSeq2SeqLM

    monkeypatch.setenv("HF_MODULES_CACHE", str(tmp_path / "modules"))
    task = TinyTask()
    model, args = model_and_args(arch, task, **SHARED, **options)
    randomize_parameters(model, solver_weights=True)
    if end_early is not None:
        end_sentences_early(model, **end_early)
    save(model, args, task.source_dictionary, task.target_dictionary, None, str(tmp_path / "hf"))
    return task, model, AutoModelForSeq2SeqLM.from_pretrained(str(tmp_path / "hf"), trust_remote_code=True).eval()


def _saved(tmp_path, monkeypatch, arch, **options):
    task, _, hf = _saved_model(tmp_path, monkeypatch, arch, **options)
    return task, hf


@pytest.mark.numerics
@pytest.mark.parametrize(
    "arch, options",
    [
        (
            "ode_transformer_rk2_learned_small",
            dict(decoder_ode_method="rk4", decoder_share_group_size=2, decoder_ode_steps=2),
        ),
        ("pcformer_small", PC_DECODER),  # one cache per evaluation: 2 predictor stages + the corrector
    ],
)
def test_runge_kutta_decoder_decodes_token_by_token_as_the_teacher_forced_pass(tmp_path, monkeypatch, arch, options):
    task, hf = _saved(tmp_path, monkeypatch, arch, **options)
    src, lengths, _ = random_batch(task, [6, 3])
    pad = task.source_dictionary.pad()
    inputs = dict(
        input_ids=_right_padded(src, lengths, pad), attention_mask=_right_padded(src, lengths, pad).ne(pad).long()
    )
    with torch.no_grad():
        sequences, stepwise = greedy_stepwise(hf, 6, **inputs)
        with LayerEvaluations(hf) as evaluations:
            full = hf(**inputs, decoder_input_ids=sequences[:, :-1]).logits.log_softmax(-1)
    assert_equal_up_to_rounding(stepwise, full, evaluations.count)


def test_folder_carries_the_solver_core_and_the_layer_field_unchanged(tmp_path, monkeypatch):
    _saved(tmp_path, monkeypatch, "ode_transformer_rk2_learned_small")
    assert_carries_ode_seqs_files_unchanged(tmp_path / "hf")


def test_adaptive_encoders_are_refused_naming_the_option(tmp_path):
    task = TinyTask()
    model, args = model_and_args(
        "ode_transformer_parallel_shared_dopri5",
        task,
        **SHARED,
        encoder_share_group_size=2,
        ode_field="residual-branch",
    )
    with pytest.raises(NotRepresentable, match=r"--encoder-ode-method dopri5"):
        save(model, args, task.source_dictionary, task.target_dictionary, None, str(tmp_path / "hf"))


@pytest.mark.parametrize("beam, lenpen", [(1, 1.0), (4, 0.6)])
def test_predictor_corrector_model_generates_fairseqs_hypotheses(tmp_path, monkeypatch, beam, lenpen):
    """Greedy and beam ``generate()`` of PCformer blocks in both stacks give fairseq's best
    hypotheses, each ended by </s> before the cap, and their scores."""
    # </s> made likely enough that greedy and beam hypotheses end within the cap, not at once
    end_early = dict(strength=1.1, seed=3)
    task, model, hf = _saved_model(tmp_path, monkeypatch, "pcformer_small", end_early=end_early, **PC_DECODER)
    src, lengths, _ = random_batch(task, [6, 4, 7], seed=3)
    max_len_b, pad, eos = 20, task.source_dictionary.pad(), task.target_dictionary.eos()
    generator = SequenceGenerator(
        [model], task.target_dictionary, beam_size=beam, len_penalty=lenpen, max_len_b=max_len_b
    )
    with torch.no_grad():
        best = [
            hyps[0] for hyps in generator.generate([model], {"net_input": {"src_tokens": src, "src_lengths": lengths}})
        ]
        right = _right_padded(src, lengths, pad)
        out = scored_search(
            hf, beam, lenpen, input_ids=right, attention_mask=right.ne(pad).long(), max_new_tokens=max_len_b + 1
        )
        with LayerEvaluations(model) as evaluations:  # per target token, counted on fairseq's model
            model(src[:1], lengths[:1], src[:1, -1:])
    for row, hypothesis in enumerate(best):
        tokens = hypothesis["tokens"].tolist()
        assert tokens[-1] == eos and len(tokens) <= max_len_b, "the hypothesis hit the cap"
        assert out.sequences[row, 1 : len(tokens) + 1].tolist() == tokens
        if beam > 1:
            tolerance = score_tolerance([hypothesis["score"].item()], evaluations.count * len(tokens))
            assert abs(out.sequences_scores[row].item() - hypothesis["score"].item()) <= tolerance


def test_predictor_corrector_blocks_with_relative_positions_are_refused_naming_the_option(tmp_path):
    """The paper's named configurations (``pcformer_wmt_*``) have relative positions, which M2M100
    lacks; their PC blocks alone would export."""
    task = TinyTask()
    model, args = model_and_args("pcformer_small", task, **SHARED, encoder_relative_positions=8)
    with pytest.raises(NotRepresentable, match=r"--encoder-relative-positions"):
        save(model, args, task.source_dictionary, task.target_dictionary, None, str(tmp_path / "hf"))
    assert not (tmp_path / "hf").exists()
