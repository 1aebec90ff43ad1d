"""Tiny models built as fairseq builds them, with their options, and fairseq's generation from
language models, for the export tests."""

import os

import torch
from fairseq import tasks
from fairseq.sequence_generator import SequenceGenerator
from fairseq.trainer import Trainer

from ode_seq.export.remote_folder import CARRIED
from testkit.by_name import model_and_options
from testkit.in_process import parse_training_args
from tests.conftest import TINY
from tests.lm.conftest import TINY_LM
from tests.numerics import LayerEvaluations, score_tolerance


def model_and_args(arch, task, **options):
    """(model in eval mode without dropout, its fairseq options); biases made non-zero."""
    model, args = model_and_options(arch, task, **{**TINY, "dropout": 0.0, **options})
    model.eval()
    randomize_parameters(model, biases=True)
    return model, args


def randomize_parameters(model, biases: bool = False, solver_weights: bool = False) -> None:
    """Trained-looking values instead of the initial ones: biases N(0, 0.1²), output coefficients
    and corrector weights N(0, 0.5²) (a corrector's uniform α, β_j would hide a misordered history)."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if biases and name.endswith("bias"):
                p.normal_(0, 0.1)
            elif solver_weights and (".combiner." in name or "corrector" in name):
                p.normal_(0, 0.5)


def log_probs(model, batch):
    """fairseq's teacher-forced log-probabilities of a (src, lengths, prev_output_tokens) batch."""
    src, lengths, prev = batch
    with torch.no_grad():
        return model.get_normalized_probs(model(src, lengths, prev), log_probs=True)


def assert_carries_ode_seqs_files_unchanged(folder) -> None:
    """The remote code's F and solver are ode-seq's own: the folder's copies of the carried files
    (the layer field among them) are byte for byte the package's."""
    assert any(path.endswith(os.path.join("ode_seq", "fields.py")) for path in CARRIED)
    for path in CARRIED:
        with open(path, "rb") as source, open(os.path.join(folder, os.path.basename(path)), "rb") as copy:
            assert copy.read() == source.read(), path


def greedy_stepwise(hf, new_tokens: int, **inputs):
    """(sequences, log-probabilities of each new token's step) of greedy ``generate()`` of exactly
    ``new_tokens`` tokens, decoded token by token through the cache."""
    out = hf.generate(
        **inputs,
        num_beams=1,
        do_sample=False,
        min_new_tokens=new_tokens,
        max_new_tokens=new_tokens,
        return_dict_in_generate=True,
        output_logits=True,
    )
    return out.sequences, torch.stack(out.logits, dim=1).log_softmax(-1)


def end_sentences_early(model, strength: float = 1.0, seed: int = 0):
    """Make </s> likely at every position of a language model, so that its hypotheses end well
    before the length cap (where fairseq forces </s> and transformers does not): the final
    LayerNorm's bias gains 2·u and the output row of </s> becomes ``strength``·u, u a random unit
    vector, so that </s>'s logit gains about 2·``strength``."""
    decoder = model.decoder
    g = torch.Generator().manual_seed(seed)
    u = torch.randn(decoder.layer_norm.bias.shape, generator=g)
    u /= u.norm()
    with torch.no_grad():
        decoder.layer_norm.bias.add_(2.0 * u)
        decoder.output_projection.weight[decoder.dictionary.eos()] = strength * u
    return model


def scored_search(hf, beam: int, lenpen: float, **inputs):
    """Greedy (``beam`` 1) or beam ``generate()`` with length penalty ``lenpen``, returning the
    sequences and their scores; ``inputs``: the model's inputs and the length limit."""
    return hf.generate(
        **inputs,
        num_beams=beam,
        length_penalty=lenpen,
        do_sample=False,
        return_dict_in_generate=True,
        output_scores=True,
    )


def lm_hypotheses(model, prompt, beam: int, lenpen: float, max_len_b: int):
    """fairseq's hypotheses for the language model continuing ``prompt`` (token ids), as
    ``LanguageModelingTask.inference_step`` runs the SequenceGenerator: from </s>, the prompt
    forced as prefix tokens, ``--max-len-a 0 --min-len 1``."""
    eos = model.decoder.dictionary.eos()
    src = torch.tensor([[eos, *prompt]])
    sample = {"net_input": {"src_tokens": src, "src_lengths": torch.tensor([src.size(1)])}}
    generator = SequenceGenerator(
        [model], model.decoder.dictionary, beam_size=beam, len_penalty=lenpen, max_len_b=max_len_b
    )
    with torch.no_grad():
        return generator.generate([model], sample, prefix_tokens=src[:, 1:] if prompt else None, bos_token=eos)[0]


def assert_generate_gives_fairseqs_hypotheses(model, hf, prompt, beam: int, lenpen: float, max_len_b: int = 20):
    """Greedy or beam ``generate()`` of the exported ``hf`` gives fairseq's best hypothesis, ended by
    </s> before the cap; with no prompt also its score (fairseq normalises a prompt's score with
    the continuation's, transformers the continuation's alone). Lower ranks of the n-best lists
    may differ by design: fairseq keeps the first ``beam`` hypotheses to end, transformers the
    ``beam`` best of those ended when it stops."""
    best = lm_hypotheses(model, prompt, beam, lenpen, max_len_b)[0]
    eos = model.decoder.dictionary.eos()
    assert best["tokens"][-1] == eos and len(best["tokens"]) <= max_len_b, "the hypothesis hit the cap"
    start = torch.tensor([[eos, *prompt]])
    with torch.no_grad():
        out = scored_search(hf, beam, lenpen, input_ids=start, max_length=max_len_b + 2)
    continuation = out.sequences[0, 1:].tolist()  # after the start token
    got = continuation[: continuation.index(eos) + 1] if eos in continuation else continuation
    assert got == best["tokens"].tolist()
    if beam > 1 and not prompt:
        with LayerEvaluations(model) as evaluations, torch.no_grad():  # per token, counted on fairseq's model
            model(start)
        tolerance = score_tolerance([best["score"].item()], evaluations.count * len(best["tokens"]))
        assert abs(out.sequences_scores[0].item() - best["score"].item()) <= tolerance


def language_model_checkpoint(directory, arch: str, *options: str, end_early: bool = False):
    """(checkpoint, the model in eval mode) of a tiny ``arch`` LM, saved by fairseq's Trainer as
    fairseq-train saves it, its data directory ``directory`` holding only ``dict.txt`` (words
    w0 … w29); ``options``: fairseq-train's; ``end_early``: see :func:`end_sentences_early`."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "dict.txt").write_text("".join(f"w{i} {100 - i}\n" for i in range(30)))
    tiny = [f"--{k.replace('_', '-')}={v}" for k, v in TINY_LM.items()]
    training = ["--cpu", "--no-save-optimizer-state", "--optimizer", "adam", "--lr", "0.001", "--dropout", "0"]
    cfg = parse_training_args(
        [str(directory), "--task", "language_modeling", "--user-dir", "user_dir", "--arch", arch, *tiny]
        + [*training, "--tokens-per-sample", "64", *options]
    )
    task = tasks.setup_task(cfg.task)
    torch.manual_seed(0)
    model = task.build_model(cfg.model)
    randomize_parameters(model, biases=True, solver_weights=True)
    if end_early:
        end_sentences_early(model)
    checkpoint = directory / "checkpoint.pt"
    Trainer(cfg, task, model, task.build_criterion(cfg.criterion)).save_checkpoint(str(checkpoint), {})
    return checkpoint, model.eval()
