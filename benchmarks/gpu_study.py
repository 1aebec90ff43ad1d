"""A short quality study on one device: ``python -m benchmarks.gpu_study``.

The configurations of the translation study (ode_seq/studies.py, which examples/translation/
quality_study.sh reads): by default residual 6-6, RK2 with learned coefficients 6-6, RK4 6-6 and
residual 24-6, on request PCformer 6-6 and IIET 6-6; each its architecture and options with every
size given here: transformer-base (d=512, FFN 2048, 8 heads). They are trained in ONE process,
round-robin: one update of each configuration in turn, until the time budget's training share is
spent. So every configuration gets the same number of updates (the
same batches, in the same order), as many as the time allows. Each is fairseq-train's own Trainer
(Adam, inverse square root schedule, label smoothing 0.1, --bf16 or --fp16 as given).

Written to ``--out`` as JSON lines as they happen, so a run cut short keeps everything up to then:
the validation NLL (bits per target token over the whole validation set, as fairseq reports it) of
every configuration every ``--valid-every`` updates and at the end, then per configuration the
tokenised BLEU of beam search (beam 4, length penalty 0.6) on the test set: SentencePiece removed,
Moses tokens kept, sacreBLEU with tokenize=none.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Protocol, Sequence, TextIO

import sacrebleu
import torch
from fairseq import utils
from fairseq.sequence_generator import SequenceGenerator

import user_dir  # noqa: F401  (registers the models, applies the fairseq fixes)
from ode_seq.studies import TRANSLATION, Study
from testkit.by_name import transformer_sizes
from testkit.device_checks import training_arguments
from testkit.in_process import fairseq_trainer

BEAM, LENPEN = 4, 0.6


@dataclass(frozen=True)
class Recipe:
    embed_dim: int = 512
    heads: int = 8
    layers: int = 6  # a 6-6 model's; a configuration's depth multiplies the encoder's (residual 24-6: 4)
    max_tokens: int = 8192
    lr: float = 1e-3
    warmup: int = 200
    valid_every: int = 50
    max_len_a: float = 1.5  # beam search's output limit, a·source length + b
    max_len_b: int = 10

    def arguments(self, data_bin: str, config: str, precision: str, device: str) -> List[str]:
        configuration = TRANSLATION[config]
        sizes = dict(
            transformer_sizes(self.embed_dim, self.heads),
            decoder_layers=self.layers,
            encoder_layers=configuration.depth * self.layers,
            **configuration.options,
        )
        extra = ["--dropout", "0.1", "--adam-betas", "(0.9, 0.98)", "--clip-norm", "0.0", "--warmup-init-lr", "1e-07"]
        return training_arguments(
            data_bin, configuration.arch, sizes, precision, device, self.lr, self.warmup, self.max_tokens, extra
        )


SMOKE_RECIPE = Recipe(
    embed_dim=32, heads=2, layers=2, max_tokens=300, lr=1e-3, warmup=4, valid_every=2, max_len_a=0, max_len_b=4
)


class Run:
    """One configuration: its Trainer and an endless stream of training batches."""

    def __init__(self, args: Sequence[str]) -> None:
        self.trainer, self.epochs = fairseq_trainer(args)
        self.task = self.trainer.task
        self.batches = self.epochs.next_epoch_itr(shuffle=True)

    def update(self) -> Optional[float]:
        if not self.batches.has_next():
            self.batches = self.trainer.get_train_iterator(self.epochs.epoch + 1).next_epoch_itr(shuffle=True)
        output = self.trainer.train_step([next(self.batches)])
        return None if output is None else float(output["loss"])

    def samples(self, split: str, max_tokens: int):
        self.task.load_dataset(split)
        itr = self.task.get_batch_iterator(
            dataset=self.task.dataset(split),
            max_tokens=max_tokens,
            max_positions=utils.resolve_max_positions(self.task.max_positions(), self.trainer.model.max_positions()),
        ).next_epoch_itr(shuffle=False)
        for sample in itr:
            yield utils.move_to_cuda(sample) if self.trainer.cuda else sample

    def nll(self, split: str, max_tokens: int) -> float:
        """NLL of ``split`` in bits per target token: fairseq's ``nll_loss`` where the criterion logs
        it (label smoothing), else its ``loss`` (cross-entropy), summed and divided by the tokens."""
        model, criterion = self.trainer.model, self.trainer.criterion
        model.eval()
        nll, tokens = 0.0, 0
        with torch.no_grad():
            for sample in self.samples(split, max_tokens):
                _, _, log = criterion(model, sample)
                nll, tokens = nll + float(log.get("nll_loss", log["loss"])), tokens + int(log["ntokens"])
        model.train()
        return nll / tokens / math.log(2)

    def test_bleu(self, recipe: Recipe) -> Dict[str, Any]:
        """Tokenised BLEU of beam search on the test subset."""
        model, dictionary = self.trainer.model, self.task.target_dictionary
        model.eval()
        generator = SequenceGenerator(
            [model],
            dictionary,
            beam_size=BEAM,
            len_penalty=LENPEN,
            max_len_a=recipe.max_len_a,
            max_len_b=recipe.max_len_b,
        )
        hypotheses: Dict[int, str] = {}
        references: Dict[int, str] = {}
        with torch.no_grad():
            for sample in self.samples("test", recipe.max_tokens):
                for i, (sample_id, hypos) in enumerate(zip(sample["id"].tolist(), generator.generate([model], sample))):
                    hypotheses[sample_id] = dictionary.string(hypos[0]["tokens"], "sentencepiece")
                    target = utils.strip_pad(sample["target"][i], dictionary.pad())
                    references[sample_id] = dictionary.string(target, "sentencepiece")
        model.train()
        ids = sorted(references)
        bleu = sacrebleu.corpus_bleu([hypotheses[i] for i in ids], [[references[i] for i in ids]], tokenize="none")
        return dict(bleu=bleu.score, sentences=len(ids), brevity_penalty=bleu.bp)


def write(out: TextIO, record: Dict[str, Any]) -> None:
    out.write(json.dumps(record) + "\n")
    out.flush()
    print(f"[study] {json.dumps(record)}", file=sys.stderr, flush=True)


def write_result(out: TextIO, event: str, config: str, updates: int, started: float, **results: Any) -> None:
    """One configuration's ``results`` after ``updates``, with the seconds since ``started``."""
    write(out, dict(event=event, config=config, updates=updates, **results, elapsed=time.perf_counter() - started))


class StudyRecipe(Protocol):
    valid_every: int
    max_tokens: int

    def arguments(self, data_bin: str, config: str, precision: str, device: str) -> List[str]: ...


def round_robin(
    recipe: StudyRecipe, args: argparse.Namespace, out: TextIO, test: Callable[[Run], Dict[str, Any]]
) -> None:
    """Train every configuration of ``args.configs`` (at ``recipe``) one update in turn until
    (1 − ``args.evaluation_share``) of the time to ``args.deadline`` (a ``time.time()``) is spent or
    ``args.max_updates`` are made, validating every ``recipe.valid_every`` updates; then ``test`` each."""
    started = time.perf_counter()
    seconds = args.deadline - time.time()
    runs = {
        config: Run(recipe.arguments(args.data_bin, config, args.precision, args.device)) for config in args.configs
    }
    write(
        out,
        dict(
            event="start",
            configs=list(runs),
            recipe=recipe.__dict__,
            precision=args.precision,
            device=args.device,
            parameters={c: sum(p.numel() for p in r.trainer.model.parameters()) for c, r in runs.items()},
            setup_seconds=time.perf_counter() - started,
        ),
    )
    training_ends = started + seconds * (1 - args.evaluation_share)
    updates, skipped = 0, {config: 0 for config in runs}
    round_seconds = 0.0
    while time.perf_counter() + round_seconds < training_ends and updates != args.max_updates:
        round_started = time.perf_counter()
        for config, run in runs.items():
            skipped[config] += run.update() is None
        updates += 1
        round_seconds = time.perf_counter() - round_started
        if updates % recipe.valid_every == 0:
            validate(runs, updates, recipe.max_tokens, started, out)
    if updates % recipe.valid_every:
        validate(runs, updates, recipe.max_tokens, started, out)
    write(out, dict(event="trained", updates=updates, skipped_updates=skipped, elapsed=time.perf_counter() - started))
    for config, run in runs.items():
        write_result(out, "test", config, updates, started, **test(run))


def validate(runs: Dict[str, Run], updates: int, max_tokens: int, started: float, out: TextIO) -> None:
    for config, run in runs.items():
        write_result(out, "valid", config, updates, started, valid_nll=run.nll("valid", max_tokens))


def study_parser(prog: str, description: str, study: Study):
    """The command line of a round-robin study of ``study``'s configurations (this one's and
    :mod:`benchmarks.gpu_lm_study`'s): those it can train, by default those marked for the GPU run."""
    parser = argparse.ArgumentParser(
        prog=prog, description=description, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data-bin", required=True, help="fairseq data-bin with train, valid and test")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument("--precision", choices=("bf16", "fp16"), default="bf16")
    parser.add_argument(
        "--deadline",
        type=float,
        required=True,
        help="when the study must have ended, in seconds since the epoch (time.time())",
    )
    parser.add_argument(
        "--evaluation-share",
        type=float,
        default=0.25,
        help="part of the time to --deadline kept for the final validation and test (default 0.25)",
    )
    parser.add_argument("--max-updates", type=int, help="stop training after this many updates, if earlier")
    parser.add_argument(
        "--configs", nargs="+", choices=study.gpu_choices(), default=[c.name for c in study.configurations if c.gpu]
    )
    parser.add_argument("--smoke", action="store_true", help="tiny models (for the test suite)")
    parser.add_argument("--out", required=True, help="JSON-lines file of results (appended)")
    return parser


def parse_study_args(parser: argparse.ArgumentParser, argv: Optional[Sequence[str]]) -> argparse.Namespace:
    args = parser.parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda, but torch sees no CUDA device")
    if not 0 < args.evaluation_share < 1 or args.deadline <= time.time():
        parser.error("--deadline must lie ahead and --evaluation-share between 0 and 1")
    return args


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_study_args(study_parser("python -m benchmarks.gpu_study", __doc__, TRANSLATION), argv)
    recipe = SMOKE_RECIPE if args.smoke else Recipe()
    with open(args.out, "a", encoding="utf-8") as out:
        round_robin(recipe, args, out, lambda run: run.test_bleu(recipe))
    return 0


if __name__ == "__main__":
    sys.exit(main())
