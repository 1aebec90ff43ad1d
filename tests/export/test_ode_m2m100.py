"""ODE Transformers with Runge–Kutta blocks in Hugging Face: the saved folder, loaded with
``trust_remote_code=True``, gives fairseq's log-probabilities, and its decoder blocks decode token
by token as in the teacher-forced pass (one cache per step and stage)."""

import os

import pytest
import torch

from ode_seq.export import NotRepresentable
from ode_seq.export.ode_m2m100 import CARRIED, has_rk_stack, save
from tests.conftest import TinyTask, random_batch
from tests.export.models import log_probs, model_and_args
from tests.numerics import LayerEvaluations, assert_equal_up_to_rounding

SHARED = dict(share_all_embeddings=True)


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
    ],
)
def test_saved_folder_with_remote_code_gives_fairseqs_log_probabilities(tmp_path, monkeypatch, arch, options):
    from transformers import AutoModelForSeq2SeqLM

    monkeypatch.setenv("HF_MODULES_CACHE", str(tmp_path / "modules"))
    task = TinyTask()
    model, args = model_and_args(arch, task, **SHARED, **options)
    with torch.no_grad():  # trained-looking coefficients, not their initial values
        for name, p in model.named_parameters():
            if ".combiner." in name:
                p.normal_(0, 0.5)
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


def _saved(tmp_path, monkeypatch, arch, **options):
    from transformers import AutoModelForSeq2SeqLM

    monkeypatch.setenv("HF_MODULES_CACHE", str(tmp_path / "modules"))
    task = TinyTask()
    model, args = model_and_args(arch, task, **SHARED, **options)
    save(model, args, task.source_dictionary, task.target_dictionary, None, str(tmp_path / "hf"))
    return task, AutoModelForSeq2SeqLM.from_pretrained(str(tmp_path / "hf"), trust_remote_code=True).eval()


@pytest.mark.numerics
def test_runge_kutta_decoder_decodes_token_by_token_as_the_teacher_forced_pass(tmp_path, monkeypatch):
    task, hf = _saved(
        tmp_path,
        monkeypatch,
        "ode_transformer_rk2_learned_small",
        decoder_ode_method="rk4",
        decoder_share_group_size=2,
        decoder_ode_steps=2,
    )
    src, lengths, _ = random_batch(task, [6, 3])
    pad = task.source_dictionary.pad()
    inputs = dict(
        input_ids=_right_padded(src, lengths, pad), attention_mask=_right_padded(src, lengths, pad).ne(pad).long()
    )
    with torch.no_grad():
        out = hf.generate(
            **inputs,
            num_beams=1,
            do_sample=False,
            min_new_tokens=6,
            max_new_tokens=6,
            return_dict_in_generate=True,
            output_logits=True,
        )
        stepwise = torch.stack(out.logits, dim=1).log_softmax(-1)
        with LayerEvaluations(hf) as evaluations:
            full = hf(**inputs, decoder_input_ids=out.sequences[:, :-1]).logits.log_softmax(-1)
    assert_equal_up_to_rounding(stepwise, full, evaluations.count)


def test_folder_carries_the_solver_core_and_the_layer_field_unchanged(tmp_path, monkeypatch):
    """The remote code's F and solver are ode-seq's own: the files are byte for byte the package's."""
    _saved(tmp_path, monkeypatch, "ode_transformer_rk2_learned_small")
    assert any(path.endswith(os.path.join("layers", "fields.py")) for path in CARRIED)
    for path in CARRIED:
        with open(path, "rb") as source, open(tmp_path / "hf" / os.path.basename(path), "rb") as copy:
            assert copy.read() == source.read(), path


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


def test_predictor_corrector_encoders_are_refused_naming_the_option(tmp_path):
    task = TinyTask()
    model, args = model_and_args("pcformer_small", task, **SHARED)
    with pytest.raises(NotRepresentable, match=r"--encoder-ode-corrector multistep"):
        save(model, args, task.source_dictionary, task.target_dictionary, None, str(tmp_path / "hf"))
