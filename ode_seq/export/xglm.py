"""A Hugging Face ``XGLMForCausalLM`` equal to a plain pre-norm fairseq ``transformer_lm``.

XGLM was ported from fairseq's ``transformer_lm``, and point by point (checked against fairseq
0.12's ``transformer_decoder.py``/``transformer_layer.py`` and transformers' ``modeling_xglm.py``)
it is the pre-norm decoder: embeddings scaled by √d (``scale_embedding``, fairseq's
``--no-scale-embedding`` off), plus sinusoidal positions (the same sin‖cos table with a zero row
at the padding index 1; XGLM's fixed offset 2 is fairseq's padding_idx + 1 for its dictionaries'
pad = 1), dropout, pre-norm layers with the same parameter names, one final LayerNorm, and an
output projection without bias tied to the embeddings or not (``tie_word_embeddings`` =
``--share-decoder-input-output-embed``). Weights map 1:1: ``decoder.X`` → ``model.X``,
``decoder.output_projection`` → ``lm_head``.

What XGLM lacks is refused by :class:`NotRepresentable` naming the option: post-norm layers
(fairseq's plain ``transformer_lm`` default), ``--no-decoder-final-norm`` (the ``wiki103``
presets), ``--layernorm-embedding``, learned or no positions, input/output projections
(``--decoder-input-dim``/``--decoder-output-dim`` ≠ ``--decoder-embed-dim``), adaptive input and
softmax, character embeddings, the ``--scale-*`` extras and BASE layers. Positions: XGLM takes
them from ``position_ids`` (by default 0, 1, … from the cache length; in ``generate()`` the
cumulative attention mask), fairseq from the tokens (pads skipped): the same for right-padded
inputs and for left-padded prompts in ``generate()``.

Generation: fairseq's language models start from </s> (``<s>`` with ``--add-bos-token``), and
:func:`generation_config` gives ``generate()`` fairseq-generate's beam search (see
:mod:`.m2m100`); ``min_length`` 2 is fairseq's ``--min-len 1`` counted with the start token, and
``max_length`` stops where fairseq stops, at the model's positions.
"""

from __future__ import annotations

from typing import Any, Dict

from torch import Tensor

from .m2m100 import ACTIVATIONS
from .plain import NotRepresentable, PlainTransformer

# fairseq's special symbols, which XGLM's config (pad 1, offset 2) and generate() assume.
BOS, PAD, EOS = 0, 1, 2


def refusals(config: Dict[str, Any]):
    """(refused, option, reason) of each fairseq ``transformer_lm`` option XGLM lacks."""
    c = config.get
    dim = c("decoder_embed_dim")
    return [
        (not c("decoder_normalize_before"), "post-norm layers (no --decoder-normalize-before)", "XGLM is pre-norm"),
        (c("no_decoder_final_norm"), "--no-decoder-final-norm", "XGLM ends with a LayerNorm"),
        (c("layernorm_embedding"), "--layernorm-embedding", "XGLM has no embedding LayerNorm"),
        (c("decoder_learned_pos"), "--decoder-learned-pos", "XGLM's positions are sinusoidal"),
        (c("no_token_positional_embeddings"), "--no-token-positional-embeddings", "XGLM adds positions"),
        (
            c("decoder_input_dim", dim) != dim or c("decoder_output_dim", dim) != dim,
            "--decoder-input-dim/--decoder-output-dim",
            "XGLM has no input or output projection",
        ),
        (c("adaptive_input"), "--adaptive-input", "XGLM has one embedding table"),
        (c("adaptive_softmax_cutoff"), "--adaptive-softmax-cutoff", "XGLM's output is one projection"),
        (c("character_embeddings"), "--character-embeddings", "XGLM has one embedding table"),
        (
            c("scale_attn") or c("scale_fc") or c("scale_heads") or c("scale_resids"),
            "--scale-attn/--scale-fc/--scale-heads/--scale-resids",
            "XGLM's layers have no extra norms or scales",
        ),
        (c("base_layers"), "--base-layers", "XGLM has no BASE layers"),
        (
            c("activation_fn", "relu") not in ACTIVATIONS,
            f"--activation-fn {c('activation_fn')}",
            f"transformers' XGLM takes {', '.join(ACTIVATIONS)}",
        ),
    ]


def check_representable(config: Dict[str, Any], alternative: str) -> None:
    """NotRepresentable naming the first option of fairseq's LM ``config`` XGLM lacks;
    ``alternative``: what the user can export instead."""
    for refused, option, reason in refusals(config):
        if refused:
            raise NotRepresentable(f"{option}: {reason}; {alternative}")


def check_dictionary(dictionary) -> None:
    """XGLM's positions (offset 2) and generate() assume fairseq's <s> 0, <pad> 1, </s> 2."""
    if (dictionary.bos(), dictionary.pad(), dictionary.eos()) != (BOS, PAD, EOS):
        raise NotRepresentable(
            f"the dictionary numbers <s>, <pad>, </s> as {dictionary.bos()}, {dictionary.pad()}, "
            f"{dictionary.eos()}: XGLM's positions assume fairseq's 0, 1, 2"
        )


def xglm_options(plain: PlainTransformer) -> Dict[str, Any]:
    """XGLMConfig's options for the language model ``plain``."""
    c = plain.config
    return dict(
        vocab_size=plain.state_dict["decoder.embed_tokens.weight"].size(0),
        max_position_embeddings=c["max_target_positions"],
        d_model=c["decoder_embed_dim"],
        ffn_dim=c["decoder_ffn_embed_dim"],
        num_layers=plain.layers[1],
        attention_heads=c["decoder_attention_heads"],
        activation_function=ACTIVATIONS[c.get("activation_fn", "relu")],
        dropout=c.get("dropout", 0.0),
        attention_dropout=c.get("attention_dropout", 0.0),
        activation_dropout=c.get("activation_dropout", 0.0),
        layerdrop=0.0,
        scale_embedding=not c.get("no_scale_embedding", False),
        tie_word_embeddings=bool(c.get("share_decoder_input_output_embed", False)),
        bos_token_id=BOS,
        pad_token_id=PAD,
        eos_token_id=EOS,
        decoder_start_token_id=EOS,
    )


def xglm_state_dict(plain: PlainTransformer) -> Dict[str, Tensor]:
    """fairseq's parameter names → XGLM's: ``decoder.X`` → ``model.X`` (layers, final norm,
    embeddings), ``decoder.output_projection`` → ``lm_head``."""
    state = {}
    for name, value in plain.state_dict.items():
        inner = name.split(".", 1)[1]
        if inner.startswith("output_projection."):
            state["lm_head." + inner.split(".", 1)[1]] = value
        elif inner.startswith(("layers.", "layer_norm.", "embed_tokens.")):
            state["model." + inner] = value
    return state


def load_weights(model, plain: PlainTransformer):
    """``model`` (an XGLMForCausalLM) with the weights of ``plain``, in eval mode."""
    state = xglm_state_dict(plain)
    expected = set(model.state_dict())
    if set(state) != expected:
        raise NotRepresentable(f"the model's parameters do not map onto XGLM's: {sorted(set(state) ^ expected)[:3]}")
    model.load_state_dict(state)
    return model.eval()


def build(plain: PlainTransformer, dictionary):
    """The XGLMForCausalLM of the language model ``plain``, in eval mode."""
    from transformers import XGLMConfig, XGLMForCausalLM

    check_representable(plain.config, "the model can still go --to fairseq")
    check_dictionary(dictionary)
    return load_weights(XGLMForCausalLM(XGLMConfig(**xglm_options(plain))), plain)


def generation_config(
    positions: int, add_bos_token: bool = False, beam: int = 5, lenpen: float = 1.0, max_len_b: int = 200
):
    """fairseq-generate's ``--beam --lenpen --max-len-b`` (``--max-len-a 0``, ``--min-len 1``)
    for a language model of ``positions`` positions: generation starts from </s> (<s> with
    ``--add-bos-token``), and ``max_length`` counts that start token and the </s> fairseq would end
    with. fairseq generates at most ``positions`` − 1 tokens before that </s> (its generator's
    ``max_len`` is capped at the model's positions − 1), so the model never reads more than its
    ``positions``; ``generate()`` refuses a prompt of ``max_length`` tokens or more, as
    fairseq-interactive refuses a prompt that takes more than ``positions`` with its start token.
    ``do_sample`` is said (False): ``pipeline("text-generation")`` samples where the config is silent."""
    from transformers import GenerationConfig

    return GenerationConfig(
        num_beams=beam,
        do_sample=False,
        length_penalty=lenpen,
        early_stopping=True,
        min_length=2,
        max_length=min(max_len_b, positions - 1) + 2,
        suppress_tokens=[PAD],
        bos_token_id=BOS if add_bos_token else EOS,
        pad_token_id=PAD,
        eos_token_id=EOS,
    )
