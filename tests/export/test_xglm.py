"""Language models that are plain pre-norm Transformers in Hugging Face: XGLM is fairseq's
``transformer_lm`` point by point, so the converted model gives fairseq's log-probabilities and
``generate()`` gives fairseq's hypotheses; what XGLM lacks is refused by name."""

import pytest
import torch
from fairseq.modules.sinusoidal_positional_embedding import SinusoidalPositionalEmbedding
from transformers.models.xglm.modeling_xglm import XGLMSinusoidalPositionalEmbedding

from ode_seq.export import NotRepresentable, plain_transformer
from ode_seq.export.xglm import build, generation_config
from tests.conftest import TinyTask
from tests.export.models import assert_generate_gives_fairseqs_hypotheses, end_sentences_early, model_and_args
from tests.lm.conftest import TINY_LM, TINY_TIME
from tests.numerics import LayerEvaluations, assert_equal_up_to_rounding, rounding_tolerance


def _xglm(arch, end_early=False, **options):
    """(the fairseq LM, its XGLM with the exported generation config)."""
    task = TinyTask()
    model, args = model_and_args(arch, task, **{**TINY_LM, **options})
    if end_early:
        end_sentences_early(model)
    hf = build(plain_transformer(model, args), task.target_dictionary)
    hf.generation_config = generation_config(hf.config.max_position_embeddings)
    return model, hf


def _tokens(batch, length, seed=0):
    """Sentences as fairseq's language models read them: </s>, then words."""
    tokens = torch.randint(4, 34, (batch, length), generator=torch.Generator().manual_seed(seed))
    tokens[:, 0] = 2
    return tokens


@pytest.mark.numerics
def test_xglm_positions_are_fairseqs_for_the_same_tokens():
    """XGLM's offset 2 on positions 0, 1, … is fairseq's padding_idx + 1 on its token positions."""
    tokens = _tokens(2, 40)
    fairseq = SinusoidalPositionalEmbedding(32, padding_idx=1, init_size=50)(tokens)
    xglm = XGLMSinusoidalPositionalEmbedding(50, 32, padding_idx=1)(torch.arange(40).expand(2, 40))
    angles = torch.arange(42, dtype=torch.float32)  # sin and cos of angles up to 41
    torch.testing.assert_close(xglm, fairseq, atol=rounding_tolerance(angles, 1), rtol=0)


@pytest.mark.numerics
@pytest.mark.parametrize(
    "arch, options",
    [
        ("ode_transformer_lm_euler", {}),
        # one layer shared by a group of 2 over [0, 2] in 2 steps: that layer twice
        ("ode_transformer_lm_euler", dict(decoder_share_group_size=2)),
        # RK-sublayer Euler at step size 2/3: layers with output projections scaled by 2/3
        ("ode_transformer_lm_euler", dict(ode_scope="sublayer", decoder_share_group_size=2, decoder_ode_steps=3)),
        ("ode_transformer_lm_nonauto", dict(TINY_TIME, decoder_ode_steps=3)),
        (
            "ode_transformer_lm_euler",
            dict(share_decoder_input_output_embed=True, activation_fn="gelu", no_scale_embedding=True),
        ),
    ],
)
def test_xglm_gives_fairseqs_log_probabilities(arch, options):
    model, hf = _xglm(arch, **options)
    assert type(hf).__name__ == "XGLMForCausalLM"
    tokens = _tokens(3, 9)
    with torch.no_grad():
        expected = model.get_normalized_probs(model(tokens), log_probs=True)
        with LayerEvaluations(hf) as evaluations:
            got = hf(input_ids=tokens).logits.log_softmax(-1)
    assert_equal_up_to_rounding(got, expected, evaluations.count)


@pytest.mark.parametrize(
    "prompt, beam, lenpen",
    [
        ([], 1, 1.0),  # greedy
        ([], 4, 1.0),  # fairseq-generate's default length penalty
        ([], 4, 0.6),
        ([5, 9, 7], 1, 1.0),
        ([5, 9, 7], 4, 0.0),  # a prompt's score is normalised differently unless lenpen is 0
    ],
)
def test_generate_gives_fairseqs_hypotheses(prompt, beam, lenpen):
    model, hf = _xglm("ode_transformer_lm_euler", end_early=True, decoder_share_group_size=2)
    assert_generate_gives_fairseqs_hypotheses(model, hf, prompt, beam, lenpen)


@pytest.mark.parametrize(
    "options, refusal",
    [
        (dict(no_decoder_final_norm=True), r"--no-decoder-final-norm"),
        (dict(layernorm_embedding=True), r"--layernorm-embedding"),
        (dict(decoder_learned_pos=True), r"--decoder-learned-pos"),
        (dict(decoder_output_dim=16), r"--decoder-input-dim/--decoder-output-dim"),
    ],
)
def test_what_xglm_lacks_is_refused_naming_the_option(options, refusal):
    with pytest.raises(NotRepresentable, match=refusal + r".*--to fairseq"):
        _xglm("ode_transformer_lm_euler", **options)
