"""ODE Transformers with Runge–Kutta encoders in Hugging Face: the saved folder, loaded with
``trust_remote_code=True``, gives fairseq's log-probabilities; RK decoders are refused."""
import pytest
import torch

from ode_seq.export import NotRepresentable
from ode_seq.export.ode_m2m100 import has_rk_encoder, save
from tests.conftest import TinyTask, random_batch
from tests.export.models import log_probs, model_and_args

SHARED = dict(share_all_embeddings=True)


def _right_padded(src, lengths, pad):
    right = torch.full_like(src, pad)
    for row, n in enumerate(lengths.tolist()):
        right[row, :n] = src[row, src.size(1) - n:]
    return right


@pytest.mark.parametrize("arch, options", [
    ("ode_transformer_rk2_learned_small", {}),  # the paper's RK2 with the learned gate
    ("ode_transformer_rk4_small", dict(encoder_share_group_size=2, encoder_ode_steps=3)),
    ("ode_transformer_rk4_small", dict(ode_coefficients="ema")),
    ("ode_transformer_rk2_learned_small", dict(ode_coefficients="learned-shared")),
])
def test_saved_folder_with_remote_code_gives_fairseqs_log_probabilities(tmp_path, monkeypatch, arch, options):
    from transformers import AutoModelForSeq2SeqLM

    monkeypatch.setenv("HF_MODULES_CACHE", str(tmp_path / "modules"))
    task = TinyTask()
    model, args = model_and_args(arch, task, **SHARED, **options)
    with torch.no_grad():  # trained-looking coefficients, not their initial values
        for name, p in model.named_parameters():
            if ".combiner." in name:
                p.normal_(0, 0.5)
    assert has_rk_encoder(model)
    save(model, args, task.source_dictionary, task.target_dictionary, None, str(tmp_path / "hf"))
    hf = AutoModelForSeq2SeqLM.from_pretrained(str(tmp_path / "hf"), trust_remote_code=True).eval()
    assert type(hf).__name__ == "ODEM2M100ForConditionalGeneration"
    src, lengths, prev = random_batch(task, [6, 4, 7, 1])
    pad = task.source_dictionary.pad()
    right = _right_padded(src, lengths, pad)
    with torch.no_grad():
        got = hf(input_ids=right, attention_mask=right.ne(pad).long(), decoder_input_ids=prev).logits.log_softmax(-1)
    mask = prev.ne(pad)
    torch.testing.assert_close(got[mask], log_probs(model, (src, lengths, prev))[mask], atol=1e-5, rtol=0)


def test_runge_kutta_decoders_are_refused_naming_the_option(tmp_path):
    task = TinyTask()
    model, args = model_and_args("ode_transformer_rk4_encdec_small", task, **SHARED)
    with pytest.raises(NotRepresentable, match=r"--decoder-ode-method"):
        save(model, args, task.source_dictionary, task.target_dictionary, None, str(tmp_path / "hf"))
