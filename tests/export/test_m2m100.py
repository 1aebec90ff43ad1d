"""The M2M100 conversion: every part of fairseq's pre-norm Transformer has its M2M100 twin, so the
converted model gives fairseq's log-probabilities; what M2M100 lacks is refused by name."""

import pytest
import torch
from fairseq.modules.sinusoidal_positional_embedding import SinusoidalPositionalEmbedding
from transformers.models.m2m_100.modeling_m2m_100 import M2M100SinusoidalPositionalEmbedding

from ode_seq.export import NotRepresentable, plain_transformer
from ode_seq.export.m2m100 import build
from tests.conftest import TinyTask, random_batch
from tests.export.models import log_probs, model_and_args
from tests.numerics import LayerEvaluations, assert_equal_up_to_rounding, rounding_tolerance

SHARED = dict(share_all_embeddings=True)


@pytest.mark.numerics
def test_sinusoidal_positions_are_fairseqs_table_with_its_padding_row():
    ours = SinusoidalPositionalEmbedding.get_embedding(40, 32, 1)
    theirs = M2M100SinusoidalPositionalEmbedding.get_embedding(40, 32, 1)
    # sin and cos of angles up to 39 (position × frequency ≤ 1): a rounding of the angle moves them by ε·39
    angles = torch.arange(40, dtype=ours.dtype)
    torch.testing.assert_close(theirs, ours, atol=rounding_tolerance(angles, 1), rtol=0)


@pytest.mark.numerics
@pytest.mark.parametrize(
    "arch, options",
    [
        ("ode_transformer_euler_small", dict(encoder_share_group_size=2)),
        (
            "ode_transformer_nonauto_small",
            dict(time_features=8, time_hidden_dim=16, time_embed_dim=4, encoder_ode_steps=3),
        ),
        ("transformer", dict(encoder_normalize_before=True, decoder_normalize_before=True, activation_fn="gelu")),
    ],
)
def test_m2m100_gives_fairseqs_log_probabilities_under_teacher_forcing(arch, options):
    task = TinyTask()
    model, args = model_and_args(arch, task, **SHARED, **options)
    hf = build(plain_transformer(model, args))
    src, lengths, prev = random_batch(task, [6, 4, 7, 1])
    expected = log_probs(model, (src, lengths, prev))
    # fairseq pads sources on the left, transformers on the right (with an attention mask).
    pad = task.source_dictionary.pad()
    right = torch.full_like(src, pad)
    for row, n in enumerate(lengths.tolist()):
        right[row, :n] = src[row, src.size(1) - n :]
    with torch.no_grad(), LayerEvaluations(hf) as evaluations:
        logits = hf(input_ids=right, attention_mask=right.ne(pad).long(), decoder_input_ids=prev).logits
    got = logits.log_softmax(-1)
    mask = prev.ne(pad)
    assert_equal_up_to_rounding(got[mask], expected[mask], evaluations.count)


@pytest.mark.parametrize(
    "options, refusal",
    [
        (dict(), r"--share-all-embeddings"),
        (dict(SHARED, encoder_normalize_before=False), r"--encoder-normalize-before"),
        (dict(SHARED, layernorm_embedding=True), r"--layernorm-embedding"),
        (dict(SHARED, encoder_learned_pos=True), r"learned-pos"),
    ],
)
def test_what_m2m100_lacks_is_refused_naming_the_option(options, refusal):
    task = TinyTask()
    model, args = model_and_args(
        "transformer", task, **{"encoder_normalize_before": True, "decoder_normalize_before": True, **options}
    )
    with pytest.raises(NotRepresentable, match=refusal):
        build(plain_transformer(model, args))
