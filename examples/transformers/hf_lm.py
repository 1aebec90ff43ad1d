"""The stages of examples/transformers/demo.sh after the corpus and the fairseq model: a word-level
tokenizer, Llama-shaped ODE language models trained with transformers' Trainer, the residual model
upcycled into RK2, and the exported fairseq model trained on in transformers.

    python examples/transformers/hf_lm.py --work-dir DIR --corpus DIR --fairseq-folder DIR ... (demo.sh's options)

Every stage writes DIR/STAGE.tmp and renames it to DIR/STAGE when complete, so a rerun skips what is
done; each model folder holds result.json (its perplexities and losses), read by the summary.
Progress goes to the standard error, the summary of results to the standard output.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Callable, Dict, List, Sequence

import torch
from tokenizers import Tokenizer, models, pre_tokenizers, trainers
from transformers import (
    AutoModelForCausalLM,
    AutoTokenizer,
    PreTrainedTokenizerFast,
    PrinterCallback,
    Trainer,
    TrainerCallback,
    TrainingArguments,
)

from ode_seq.transformers import ODELlamaConfig, ODELlamaForCausalLM

SPECIALS = ["<pad>", "</s>", "<unk>"]  # ids 0, 1, 2 of the word-level tokenizer
RESULT = "result.json"


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def publish_stage(target: Path, write: Callable[[Path], None]) -> None:
    """Run ``write(target.tmp)`` unless ``target`` exists, then rename the finished output into place."""
    if target.exists():
        log(f"skip {target.name}: {target} exists")
        return
    log(f"run {target.name} → {target}")
    partial = target.with_name(target.name + ".tmp")
    shutil.rmtree(partial, ignore_errors=True)
    write(partial)
    partial.rename(target)


def stage_name(partial: Path) -> str:
    return partial.name.removesuffix(".tmp")


def read_lines(path: Path, limit: int = 0) -> List[str]:
    with open(path, encoding="utf-8") as text:
        lines = [line.rstrip("\n") for line in text]
    return lines[:limit] if limit else lines


def token_stream(lines: Sequence[str], encode: Callable[[List[str]], List[List[int]]], eos: int) -> torch.Tensor:
    """The ids of ``lines``, each line followed by ``eos`` and the whole started by it (fairseq's
    language-model stream: a verse ends with </s>, so the first verse is predicted after one too)."""
    ids = [eos]
    for line_ids in encode(list(lines)):
        ids += line_ids + [eos]
    return torch.tensor(ids)


def blocks(stream: torch.Tensor, block: int) -> torch.Tensor:
    """Consecutive blocks of ``block`` + 1 tokens overlapping by one token: block i predicts
    stream[i·block + 1 … (i+1)·block], so every token but the first is a target once."""
    count = (len(stream) - 1) // block
    return torch.stack([stream[i * block : (i + 1) * block + 1] for i in range(count)])


@torch.no_grad()
def perplexity(model: torch.nn.Module, stream: torch.Tensor, block: int, context: int, batch: int = 32) -> Dict:
    """exp(mean negative log-likelihood) of every token of ``stream`` after its first, each predicted
    once in a window of ``block`` tokens with at least ``context`` tokens before it (all tokens of the
    first window: fairseq-eval-lm's --context-window): windows start every ``block − context`` tokens
    and score their targets after the first ``context``."""
    model.eval()
    stride = block - context
    windows = []
    for start in range(0, len(stream) - 1, stride):
        window = stream[start : start + block + 1]
        windows.append((window, 0 if start == 0 else context))
        if start + block + 1 >= len(stream):
            break
    total, count = 0.0, 0
    for first in range(0, len(windows), batch):
        group = windows[first : first + batch]
        for length in sorted({len(w) for w, _ in group}):
            same = [(w, skip) for w, skip in group if len(w) == length]
            ids = torch.stack([w for w, _ in same])
            logits = model(input_ids=ids[:, :-1]).logits.float()
            nll = torch.nn.functional.cross_entropy(logits.transpose(1, 2), ids[:, 1:], reduction="none")
            for row, (_, skip) in enumerate(same):
                total += nll[row, skip:].double().sum().item()
                count += length - 1 - skip
    if count != len(stream) - 1:
        raise AssertionError(f"scored {count} tokens of {len(stream) - 1}: the windows must cover each once")
    return {"perplexity": math.exp(total / count), "tokens": count}


def build_tokenizer(corpus: Path, output: Path) -> None:
    """A word-level tokenizer of the training split's words seen at least twice (prepare.sh's
    dictionary threshold), trained with the ``tokenizers`` library, as a PreTrainedTokenizerFast."""
    words = Tokenizer(models.WordLevel(unk_token="<unk>"))
    words.pre_tokenizer = pre_tokenizers.WhitespaceSplit()  # the text is Moses-tokenised already
    trainer = trainers.WordLevelTrainer(min_frequency=2, special_tokens=SPECIALS)
    words.train([str(corpus / "tok" / "train.txt")], trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=words, pad_token="<pad>", eos_token="</s>", bos_token="</s>", unk_token="<unk>"
    )
    tokenizer.save_pretrained(output)


class LossLog(TrainerCallback):
    """The logged training losses, also printed to the standard error."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.losses: List[float] = []

    def on_log(self, args, state, control, logs=None, **kwargs) -> None:
        if logs and "loss" in logs:
            self.losses.append(logs["loss"])
            log(f"{self.name}: step {state.global_step}/{state.max_steps}, loss {logs['loss']:.4f}")


def train_with_trainer(model, data: torch.Tensor, options: argparse.Namespace, steps: int, name: str, scratch: Path):
    """``steps`` updates of ``options.batch_size`` blocks with transformers' Trainer (AdamW (0.9, 0.98),
    weight decay 0.01, warmup then linear decay to 0); returns the logged losses and the seconds."""
    dataset = [{"input_ids": row, "labels": row} for row in data]
    args = TrainingArguments(
        output_dir=str(scratch),
        max_steps=steps,
        per_device_train_batch_size=options.batch_size,
        learning_rate=options.lr,
        warmup_steps=min(options.warmup, steps // 2),
        lr_scheduler_type="linear",
        weight_decay=0.01,
        adam_beta2=0.98,
        logging_steps=max(1, steps // 10),
        save_strategy="no",
        report_to="none",
        use_cpu=True,
        seed=options.seed,
        dataloader_num_workers=0,
        disable_tqdm=True,
    )
    losses = LossLog(name)
    trainer = Trainer(model=model, args=args, train_dataset=dataset, callbacks=[losses])
    trainer.remove_callback(PrinterCallback)
    started = time.monotonic()
    trainer.train()
    return losses.losses, time.monotonic() - started


def llama_config(tokenizer, options: argparse.Namespace, **ode):
    return ODELlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=options.dim,
        intermediate_size=4 * options.dim,
        num_hidden_layers=options.layers,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=options.block,
        tie_word_embeddings=True,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.eos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        use_cache=False,
        **ode,
    )


def write_model(output: Path, model, tokenizer, result: Dict) -> None:
    model.save_pretrained(output)
    tokenizer.save_pretrained(output)
    (output / RESULT).write_text(json.dumps(result, indent=1) + "\n")


def train_llama(output: Path, ode: Dict, tokenizer, train: torch.Tensor, test: torch.Tensor, options) -> None:
    """A Llama-shaped ODE LM with the ``ode`` settings, from scratch: trained, then scored on the test split."""
    torch.manual_seed(options.seed)
    model = ODELlamaForCausalLM(llama_config(tokenizer, options, **ode))
    losses, seconds = train_with_trainer(model, train, options, options.steps, stage_name(output), output / "trainer")
    shutil.rmtree(output / "trainer")
    score = perplexity(model, test, options.block, options.context)
    write_model(
        output,
        model,
        tokenizer,
        {"settings": ode, "steps": options.steps, "losses": losses, "train_seconds": seconds, "test": score},
    )


def upcycle(output: Path, residual: Path, train: torch.Tensor, test: torch.Tensor, options) -> None:
    """The trained residual model as RK2 with learned stage weights (each layer's weights reused at
    both stages, new gates), scored, trained ``options.upcycle_steps`` more and scored again."""
    torch.manual_seed(options.seed)
    model = ODELlamaForCausalLM.from_pretrained(
        residual, decoder_ode_method=options.upcycle_method, ode_coefficients="learned"
    )
    reused = check_reused(model, ODELlamaForCausalLM.from_pretrained(residual))
    before = perplexity(model, test, options.block, options.context)
    losses, seconds = train_with_trainer(
        model, train, options, options.upcycle_steps, stage_name(output), output / "trainer"
    )
    shutil.rmtree(output / "trainer")
    score = perplexity(model, test, options.block, options.context)
    result = {
        "settings": {"decoder_ode_method": options.upcycle_method, "ode_coefficients": "learned"},
        "from": residual.name,
        "new_parameters": reused,
        "steps": options.upcycle_steps,
        "test_before": before,
        "losses": losses,
        "train_seconds": seconds,
        "test": score,
    }
    write_model(output, model, AutoTokenizer.from_pretrained(residual), result)


def check_reused(upcycled, residual) -> List[str]:
    """The upcycled model's parameters that the residual model lacks (the stage gates); every other
    one must equal the residual model's, bitwise."""
    old = dict(residual.named_parameters())
    new = []
    for name, value in upcycled.named_parameters():
        if name not in old:
            new.append(name)
        elif not torch.equal(value, old[name]):
            raise AssertionError(f"upcycling changed {name}")
    return new


def fairseq_loss(checkpoint: Path, data_bin: Path, batch: torch.Tensor) -> torch.Tensor:
    """The fairseq model's per-token negative log-likelihoods of ``batch`` (inputs batch[:, :-1],
    targets batch[:, 1:]; evaluation mode), as its criterion computes them."""
    from fairseq import checkpoint_utils, utils

    utils.import_user_module(argparse.Namespace(user_dir=str(Path(__file__).resolve().parents[2] / "user_dir")))
    models, _ = checkpoint_utils.load_model_ensemble([str(checkpoint)], arg_overrides={"data": str(data_bin)})
    model = models[0].eval()
    with torch.no_grad():
        lprobs = model.get_normalized_probs(model(batch[:, :-1]), log_probs=True)
    return -lprobs.gather(-1, batch[:, 1:, None]).squeeze(-1)


def continue_fairseq(output: Path, folder: Path, checkpoint: Path, corpus: Path, options) -> None:
    """The exported fairseq model through AutoModelForCausalLM / AutoTokenizer (its folder's code):
    the first training loss against fairseq's on the same batch, then a plain AdamW loop."""
    tokenizer = AutoTokenizer.from_pretrained(folder, trust_remote_code=True)
    model = AutoModelForCausalLM.from_pretrained(folder, trust_remote_code=True)
    eos = tokenizer.eos_token_id
    # tokens → ids: the tokenizer's call would refuse a text longer than the model's positions (a prompt)
    encode = lambda lines: [tokenizer.convert_tokens_to_ids(tokenizer.tokenize(line)) for line in lines]  # noqa: E731
    needed = options.continue_steps * options.batch_size * options.block + 1
    lines, stream = read_lines(corpus / "raw" / "train.txt"), None
    for count in (2000, 8000, 0):  # Moses-tokenise only as many verses as the steps need
        stream = token_stream(lines[:count] if count else lines, encode, eos)
        if len(stream) >= needed or count == 0:
            break
    train = blocks(stream, options.block)
    test = token_stream(read_lines(corpus / "raw" / "test.txt"), encode, eos)
    before = perplexity(model, test, options.block, options.context)

    torch.manual_seed(options.seed)
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=options.continue_lr, betas=(0.9, 0.98), weight_decay=0.01)
    losses: List[float] = []
    first = {}
    started = time.monotonic()
    for step in range(options.continue_steps):
        batch = train[(step * options.batch_size) % len(train) :][: options.batch_size]
        if step == 0:
            with LayerEvaluations(model) as counted:
                out = model(input_ids=batch, labels=batch)
            first = compare_first_loss(out, batch, checkpoint, corpus / "data-bin", counted.count)
        else:
            out = model(input_ids=batch, labels=batch)
        out.loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(out.loss.item())
        if (step + 1) % max(1, options.continue_steps // 10) == 0:
            log(f"{stage_name(output)}: step {step + 1}/{options.continue_steps}, loss {losses[-1]:.4f}")
    seconds = time.monotonic() - started
    score = perplexity(model, test, options.block, options.context)
    result = {
        "first_step": first,
        "steps": options.continue_steps,
        "test_before": before,
        "losses": losses,
        "train_seconds": seconds,
        "test": score,
    }
    write_model(output, model, tokenizer, result)


class LayerEvaluations:
    """Counts the calls of the model's modules named ``self_attn`` (one per layer evaluation) in a
    ``with`` block."""

    def __init__(self, model: torch.nn.Module) -> None:
        self.modules = [m for name, m in model.named_modules() if name.rpartition(".")[2] == "self_attn"]
        self.count = 0

    def __enter__(self) -> "LayerEvaluations":
        self.hooks = [m.register_forward_hook(self.counted) for m in self.modules]
        return self

    def counted(self, *_) -> None:
        self.count += 1

    def __exit__(self, *_) -> None:
        for hook in self.hooks:
            hook.remove()


def compare_first_loss(out, batch: torch.Tensor, checkpoint: Path, data_bin: Path, evaluations: int) -> Dict:
    """The first training forward's loss and per-token NLLs against fairseq's on the same batch, with
    the float32 rounding bound of tests/numerics.py: 4 · ε · max |NLL| · layer evaluations."""
    expected = fairseq_loss(checkpoint, data_bin, batch)
    actual = torch.nn.functional.cross_entropy(
        out.logits[:, :-1].detach().float().transpose(1, 2), batch[:, 1:], reduction="none"
    )
    bound = 4 * torch.finfo(torch.float32).eps * expected.abs().max().item() * evaluations
    return {
        "transformers_loss": out.loss.item(),
        "fairseq_loss": expected.mean().item(),
        "max_token_difference": (actual - expected).abs().max().item(),
        "rounding_bound": bound,
    }


def summary(work: Path) -> str:
    """The results of the four stages, from their result.json files."""
    rk2, residual, upcycled, exported = (
        json.loads((work / name / RESULT).read_text())
        for name in ("rk2-learned", "residual", "residual-to-rk2", "fairseq-continued")
    )
    ppl = lambda record, key="test": f"{record[key]['perplexity']:.2f}"  # noqa: E731
    trained = lambda record: f"{record['steps']} Trainer steps ({record['train_seconds']:.0f} s)"  # noqa: E731
    first = exported["first_step"]
    return "\n".join(
        [
            f"Test perplexity (every one of the {rk2['test']['tokens']} test tokens, words and verse ends, "
            f"predicted once with at least {work_context(work)} tokens of context):",
            f"  ODE Llama, RK2 learned, {trained(rk2)}: {ppl(rk2)}",
            f"  residual twin (Euler = Llama), {trained(residual)}: {ppl(residual)}",
            f"Residual model upcycled into {upcycled['settings']['decoder_ode_method']} with learned coefficients "
            f"({len(upcycled['new_parameters'])} new gate tensors, every other parameter the residual model's):",
            f"  before training: {ppl(upcycled, 'test_before')}; after {trained(upcycled)} more: {ppl(upcycled)}",
            "fairseq ODE LM exported with `ode-seq export --to hf`, trained on in transformers:",
            f"  first loss on the first batch: transformers {first['transformers_loss']:.6f}, "
            f"fairseq {first['fairseq_loss']:.6f} (per-token NLLs differ by at most "
            f"{first['max_token_difference']:.2e}; float32 rounding bound {first['rounding_bound']:.2e})",
            f"  test perplexity (its own dictionary): {ppl(exported, 'test_before')} exported; "
            f"{ppl(exported)} after {exported['steps']} steps in transformers",
        ]
    )


def work_context(work: Path) -> int:
    return json.loads((work / "settings.json").read_text())["context"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work-dir", type=Path, required=True)
    parser.add_argument("--corpus", type=Path, required=True, help="prepare.sh's work dir")
    parser.add_argument("--fairseq-checkpoint", type=Path, required=True)
    parser.add_argument("--fairseq-folder", type=Path, required=True, help="its `ode-seq export --to hf` folder")
    parser.add_argument("--steps", type=int, required=True)
    parser.add_argument("--upcycle-steps", type=int, required=True)
    parser.add_argument("--upcycle-method", default="heun")
    parser.add_argument("--continue-steps", type=int, required=True)
    parser.add_argument("--continue-lr", type=float, required=True)
    parser.add_argument("--batch-size", type=int, required=True)
    parser.add_argument("--block", type=int, required=True)
    parser.add_argument("--context", type=int, required=True)
    parser.add_argument("--layers", type=int, required=True)
    parser.add_argument("--dim", type=int, required=True)
    parser.add_argument("--lr", type=float, required=True)
    parser.add_argument("--warmup", type=int, required=True)
    parser.add_argument("--seed", type=int, required=True)
    options = parser.parse_args()
    work = options.work_dir
    work.mkdir(parents=True, exist_ok=True)
    (work / "settings.json").write_text(json.dumps({"context": options.context}) + "\n")
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", torch.get_num_threads())))

    publish_stage(work / "tokenizer", lambda out: build_tokenizer(options.corpus, out))
    tokenizer = AutoTokenizer.from_pretrained(work / "tokenizer")
    encode = lambda lines: tokenizer(lines, add_special_tokens=False)["input_ids"]  # noqa: E731
    eos = tokenizer.eos_token_id
    train = blocks(token_stream(read_lines(options.corpus / "tok" / "train.txt"), encode, eos), options.block)
    test = token_stream(read_lines(options.corpus / "tok" / "test.txt"), encode, eos)
    for name, ode in (
        ("rk2-learned", {"decoder_ode_method": "heun", "ode_coefficients": "learned"}),
        ("residual", {"decoder_ode_method": "euler"}),
    ):
        publish_stage(work / name, lambda out, ode=ode: train_llama(out, ode, tokenizer, train, test, options))
    publish_stage(work / "residual-to-rk2", lambda out: upcycle(out, work / "residual", train, test, options))
    publish_stage(
        work / "fairseq-continued",
        lambda out: continue_fairseq(out, options.fairseq_folder, options.fairseq_checkpoint, options.corpus, options),
    )
    print(summary(work))


if __name__ == "__main__":
    main()
