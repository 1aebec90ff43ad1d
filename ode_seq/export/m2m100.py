"""A Hugging Face ``M2M100ForConditionalGeneration`` equal to a plain pre-norm fairseq Transformer.

M2M100 is fairseq's pre-norm Transformer point by point (checked against fairseq 0.12's
``transformer_encoder.py``/``transformer_decoder.py`` and transformers' ``modeling_m2m_100.py``):
pre-norm layers with the same parameter names, a final LayerNorm after each stack, sinusoidal
positions from padding_idx + 1 on (fairseq's ``make_positions``; the same sin‖cos table with a
zero row at the padding index), token embeddings scaled by √d, one embedding matrix shared by
encoder, decoder and output projection, decoding started by </s>. Whatever breaks one of these is
refused by :class:`NotRepresentable` naming the option.

Generation: :func:`generation_config` gives ``generate()`` fairseq-generate's beam search. Both
keep the 2·beam best continuations, finalise the ones ending in </s> among the top beam, normalise
by (tokens including </s>)^lenpen, and stop a sentence at beam finished hypotheses
(``early_stopping=True``); fairseq's ``pad = -inf`` and ``min_len 1`` on log-probabilities are
``suppress_tokens=[pad]`` and ``min_new_tokens=1``, which also act after the log-softmax. One
difference by design: at the length cap fairseq forces </s>, transformers keeps the hypothesis
as it is (``max_new_tokens`` = fairseq's ``--max-len-b`` + 1 for the </s>, capped, as fairseq
caps it, by the model's target positions).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Dict

from torch import Tensor

from .hf_folder import TextProcessing, save_folder
from .plain import NotRepresentable, PlainTransformer

# fairseq's activation functions and transformers' names of the same function.
ACTIVATIONS = {"relu": "relu", "gelu": "gelu", "gelu_accurate": "gelu_new", "tanh": "tanh", "linear": "linear"}


def check_representable(config: Dict[str, Any], same_dictionary: bool) -> None:
    """NotRepresentable naming the first option of fairseq's model ``config`` M2M100 lacks."""
    c = config.get
    refusals = [
        (
            not same_dictionary or not c("share_all_embeddings"),
            "--share-all-embeddings",
            "M2M100 has one embedding matrix for source, target and output (train with a joined dictionary)",
        ),
        (
            not (c("encoder_normalize_before") and c("decoder_normalize_before")),
            "--encoder-normalize-before/--decoder-normalize-before",
            "M2M100's layers are pre-norm",
        ),
        (c("no_decoder_final_norm"), "--no-decoder-final-norm", "M2M100's decoder ends with a LayerNorm"),
        (c("layernorm_embedding"), "--layernorm-embedding", "M2M100 has no embedding LayerNorm"),
        (
            c("encoder_learned_pos") or c("decoder_learned_pos"),
            "--encoder/decoder-learned-pos",
            "M2M100's positions are sinusoidal",
        ),
        (c("no_token_positional_embeddings"), "--no-token-positional-embeddings", "M2M100 adds positions"),
        (c("no_scale_embedding"), "--no-scale-embedding", "M2M100 scales embeddings by sqrt(d) or not at all"),
        (
            c("activation_fn", "relu") not in ACTIVATIONS,
            f"--activation-fn {c('activation_fn')}",
            f"transformers' M2M100 takes {', '.join(ACTIVATIONS)}",
        ),
        (c("cross_self_attention"), "--cross-self-attention", "M2M100 has separate cross-attention"),
        (c("adaptive_softmax_cutoff"), "--adaptive-softmax-cutoff", "M2M100's output is one projection"),
        (
            c("decoder_output_dim", c("decoder_embed_dim")) != c("decoder_embed_dim")
            or c("decoder_input_dim", c("decoder_embed_dim")) != c("decoder_embed_dim"),
            "--decoder-output-dim/--decoder-input-dim",
            "M2M100 has no input or output projection",
        ),
    ]
    for refused, option, reason in refusals:
        if refused:
            raise NotRepresentable(
                f"{option}: {reason}; a plain Transformer can still go --to fairseq or --to ctranslate2"
            )


def m2m100_options(plain: PlainTransformer) -> Dict[str, Any]:
    """M2M100Config's options for ``plain``."""
    c = plain.config
    return dict(
        vocab_size=plain.state_dict["encoder.embed_tokens.weight"].size(0),
        max_position_embeddings=max(c["max_source_positions"], c["max_target_positions"]),
        encoder_layers=plain.layers[0],
        decoder_layers=plain.layers[1],
        encoder_ffn_dim=c["encoder_ffn_embed_dim"],
        decoder_ffn_dim=c["decoder_ffn_embed_dim"],
        encoder_attention_heads=c["encoder_attention_heads"],
        decoder_attention_heads=c["decoder_attention_heads"],
        d_model=c["encoder_embed_dim"],
        activation_function=ACTIVATIONS[c.get("activation_fn", "relu")],
        encoder_layerdrop=0.0,
        decoder_layerdrop=0.0,
        dropout=c.get("dropout", 0.0),
        attention_dropout=c.get("attention_dropout", 0.0),
        activation_dropout=c.get("activation_dropout", 0.0),
        scale_embedding=True,
        bos_token_id=0,
        pad_token_id=1,
        eos_token_id=2,
        decoder_start_token_id=2,
        tie_word_embeddings=True,
    )


def m2m100_state_dict(plain: PlainTransformer) -> Dict[str, Tensor]:
    """fairseq's parameter names → M2M100's: the layers, norms and a DLCL corrector's states keep
    theirs under ``model.``, the shared embedding is ``model.shared`` (and the tied output
    projection ``lm_head``)."""
    state = {"model.shared.weight": plain.state_dict["encoder.embed_tokens.weight"]}
    for name, value in plain.state_dict.items():
        if ".layers." in name or name.split(".")[1] in ("layer_norm", "corrector_states"):
            state[f"model.{name}"] = value
    state["lm_head.weight"] = state["model.shared.weight"]
    return state


def load_weights(model, plain: PlainTransformer):
    """``model`` (an M2M100ForConditionalGeneration) with the weights of ``plain``, in eval mode."""
    expected = set(model.state_dict()) - {"model.encoder.embed_tokens.weight", "model.decoder.embed_tokens.weight"}
    state = m2m100_state_dict(plain)
    if set(state) != expected:
        raise NotRepresentable(f"the model's parameters do not map onto M2M100's: {sorted(set(state) ^ expected)[:3]}")
    model.load_state_dict(state, strict=False)
    return model.eval()


def build(plain: PlainTransformer, same_dictionary: bool = True):
    """The M2M100 model of ``plain``, in eval mode."""
    from transformers import M2M100Config, M2M100ForConditionalGeneration

    check_representable(plain.config, same_dictionary)
    return load_weights(M2M100ForConditionalGeneration(M2M100Config(**m2m100_options(plain))), plain)


def generation_config(target_positions: int, beam: int = 4, lenpen: float = 0.6, max_len_b: int = 200):
    """fairseq-generate's ``--beam --lenpen --max-len-b`` (with --max-len-a 0, --min-len 1) for a
    model of ``target_positions`` target positions: fairseq generates at most ``target_positions``
    − 1 tokens before its </s>, so the decoder never reads more than its positions. ``do_sample``
    is said (False), so that pipelines keep the beam search instead of adding their sampling."""
    from transformers import GenerationConfig

    return GenerationConfig(
        num_beams=beam,
        do_sample=False,
        length_penalty=lenpen,
        early_stopping=True,
        min_new_tokens=1,
        max_new_tokens=min(max_len_b, target_positions - 1) + 1,
        suppress_tokens=[1],
        bos_token_id=0,
        pad_token_id=1,
        eos_token_id=2,
        decoder_start_token_id=2,
    )


def save_translation_folder(model, plain: PlainTransformer, tgt_dict, spm: str | None, text, output: str) -> None:
    """:func:`.hf_folder.save_folder` of the M2M100 ``model`` of ``plain``: its generation stops where
    fairseq's stops (the target positions), its tokenizer refuses sources longer than the source
    positions, as fairseq-interactive does."""
    c = plain.config
    text = replace(text, max_positions=c["max_source_positions"])
    save_folder(model, generation_config(c["max_target_positions"]), tgt_dict, spm, text, output)


def save(plain: PlainTransformer, src_dict, tgt_dict, spm: str | None, output: str, text=TextProcessing()) -> None:
    """The M2M100 folder of ``plain``."""
    model = build(plain, same_dictionary=src_dict.symbols == tgt_dict.symbols)
    save_translation_folder(model, plain, tgt_dict, spm, text, output)
