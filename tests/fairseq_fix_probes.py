"""Apply the plugin's fairseq fixes in a given order, in a fresh process, and report what each
changed in fairseq and whether fairseq then behaves as every fix says.

    python -m tests.fairseq_fix_probes [FIX ...]     (from the repository root; prints JSON)

``changed``: per fix applied, the dotted names of the fairseq objects its ``apply`` replaced
(module attributes, attributes of classes fairseq defines, entries of fairseq's registries).
``probes``: per fix, None when fairseq behaves as the fix says, else what went wrong; each probe
fails on fairseq without the fix.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import traceback
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable, Dict, Iterable, List, Optional
from unittest import mock

import fairseq_cli.eval_lm  # noqa: F401  (fix eval_lm_inputs patches it where fairseq-eval-lm runs)
import fairseq_cli.interactive  # noqa: F401  (fix interactive_input patches it where fairseq-interactive runs)
import fairseq_cli.train  # noqa: F401  (fix patience_across_resume patches it where fairseq-train runs)
import numpy as np
import torch

import ode_seq.models  # noqa: F401  (registers the fixture checkpoints' architectures)
from ode_seq.fairseq_fixes import FIXES

FIXTURES = Path(__file__).resolve().parent / "fixtures"
FAIRSEQ_PACKAGES = ("fairseq", "fairseq_cli")
MISSING = object()


def fairseq_modules() -> List[str]:
    """The names of fairseq's loaded modules (not of aliases such as fairseq.distributed_utils)."""
    return [
        name
        for name, module in list(sys.modules.items())
        if name.split(".")[0] in FAIRSEQ_PACKAGES and getattr(module, "__name__", None) == name
    ]


def fairseq_objects(modules: Iterable[str]) -> Dict[str, Any]:
    """Dotted name -> object, for every attribute of fairseq's ``modules``, every attribute of
    the classes they define and every entry of their dict attributes (the registries)."""
    objects: Dict[str, Any] = {}
    for module_name in modules:
        for attribute, value in list(vars(sys.modules[module_name]).items()):
            if attribute.startswith("__"):
                continue
            name = f"{module_name}.{attribute}"
            objects[name] = value
            if isinstance(value, type) and value.__module__ == module_name:
                objects.update((f"{name}.{member}", v) for member, v in vars(value).items())
            elif isinstance(value, dict):
                objects.update((f"{name}[{key!r}]", entry) for key, entry in list(value.items()))
    return objects


def changed_objects(before: Dict[str, Any], modules: Iterable[str]) -> List[str]:
    """Names whose object differs from ``before``'s (replaced, added or removed) in ``modules``."""
    after = fairseq_objects(modules)
    return sorted(
        name for name in before.keys() | after.keys() if before.get(name, MISSING) is not after.get(name, MISSING)
    )


def expect_error(error_type: type, text: str, call: Callable, *args, **kwargs) -> None:
    """``call`` raises ``error_type`` whose message contains ``text``."""
    try:
        call(*args, **kwargs)
    except error_type as error:
        assert text in str(error), f"{error_type.__name__} without {text!r}: {error}"
        return
    raise AssertionError(f"no {error_type.__name__} ({text!r})")


def batch_by_size(work: Path) -> None:
    from fairseq.data import data_utils

    sizes = np.arange(1, 13)
    batches = data_utils.batch_by_size(
        np.arange(12), lambda i: sizes[i], max_tokens=1000, required_batch_size_multiple=8
    )
    assert sorted(np.concatenate(batches).tolist()) == list(range(12)), f"batches {batches} leave sentences out"


def ngram_blocking(work: Path) -> None:
    from fairseq import sequence_generator

    blocker = sequence_generator.NGramRepeatBlock(2, use_extension=False)
    tokens = torch.tensor([[2, 5, 6, 5, 1, 1]])  # steps 0-3 generated (5 6 5): 6 would repeat "5 6"
    lprobs = blocker(tokens, torch.zeros(1, 8), bsz=1, beam_size=1, step=3)
    assert lprobs[0].isinf().tolist() == [t == 6 for t in range(8)], f"blocked {lprobs[0].tolist()}"


def checkpoint_loading(work: Path) -> None:
    from fairseq import checkpoint_utils

    torch.save({"args": argparse.Namespace(arch="transformer")}, work / "args.pt")
    assert torch.load(work / "args.pt")["args"].arch == "transformer"  # safe loading, Namespace allow-listed
    (work / "truncated.pt").write_bytes((work / "args.pt").read_bytes()[:100])
    expect_error(
        ValueError, str(work / "truncated.pt"), checkpoint_utils.load_checkpoint_to_cpu, str(work / "truncated.pt")
    )


def atomic_checkpoint_copy(work: Path) -> None:
    from fairseq import checkpoint_utils

    (work / "checkpoint1.pt").write_bytes(b"new")
    (work / "checkpoint_last.pt").write_bytes(b"old")
    inode = (work / "checkpoint_last.pt").stat().st_ino
    checkpoint_utils.PathManager.copy(str(work / "checkpoint1.pt"), str(work / "checkpoint_last.pt"), overwrite=True)
    assert (work / "checkpoint_last.pt").read_bytes() == b"new"
    assert (work / "checkpoint_last.pt").stat().st_ino != inode, "copied over the old file in place, not renamed"


def cpu_ddp(work: Path) -> None:
    from fairseq.models import distributed_fairseq_model

    torch.distributed.init_process_group("gloo", init_method=f"file://{work / 'group'}", rank=0, world_size=1)
    try:
        distributed_fairseq_model.DistributedDataParallel(torch.nn.Linear(2, 2), device_ids=[0], output_device=0)
    finally:
        torch.distributed.destroy_process_group()


def bf16_without_tpu(work: Path) -> None:
    from fairseq import options

    parser = options.get_training_parser()
    args = options.parse_args_and_arch(parser, ["data", "--arch", "transformer", "--optimizer", "adam", "--bf16"])
    assert args.tpu is False, "--bf16 switched on the TPU path"


def preprocess_hint(work: Path) -> None:
    from fairseq.tasks import TASK_REGISTRY
    from fairseq.tasks.translation import TranslationConfig

    cfg = TranslationConfig(data=str(work), source_lang="src", target_lang="tgt")
    task = TASK_REGISTRY["translation"]
    expect_error(FileNotFoundError, "fairseq-preprocess writes", task.setup_task, cfg)
    for side in ("src", "tgt"):
        (work / f"dict.{side}.txt").write_text("w 1\n")
    expect_error(FileNotFoundError, "fairseq-preprocess writes", task.setup_task(cfg).load_dataset, "train")


def restore_file(work: Path) -> None:
    from fairseq import checkpoint_utils
    from fairseq.dataclass.configs import CheckpointConfig

    cfg = CheckpointConfig(save_dir=str(work / "run"), restore_file=str(work / "chekpoint_last.pt"))
    trainer = SimpleNamespace(checkpoint_suffix="")
    expect_error(ValueError, "does not exist", checkpoint_utils.load_checkpoint, cfg, trainer)


def save_dir(work: Path) -> None:
    from fairseq import checkpoint_utils

    (work / "file").write_text("")
    expect_error(ValueError, "--save-dir", checkpoint_utils.verify_checkpoint_directory, str(work / "file" / "run"))


def model_loading(work: Path) -> None:
    from fairseq import checkpoint_utils
    from fairseq.data import Dictionary
    from fairseq.tasks import TASK_REGISTRY
    from fairseq.tasks.translation import TranslationConfig

    task = TASK_REGISTRY["translation"](
        TranslationConfig(source_lang="en", target_lang="de"), Dictionary(), Dictionary()
    )
    assert task.state_dict().get("language_pair") == ["en", "de"], "the task state does not record the pair"
    with torch.serialization.safe_globals([argparse.Namespace]):  # what checkpoint_loading allows, no more
        state = torch.load(FIXTURES / "checkpoints" / "euler.pt")
        name = next(iter(state["model"]))
        state["model"][name] = torch.full_like(state["model"][name], float("nan"))
        torch.save(state, work / "diverged.pt")
        load = checkpoint_utils.load_model_ensemble_and_task
        expect_error(ValueError, "non-finite", load, [str(work / "diverged.pt")], arg_overrides={"data": str(FIXTURES)})


def torchrun(work: Path) -> None:
    from fairseq.dataclass.configs import FairseqConfig
    from fairseq.distributed import utils as distributed_utils

    cfg = FairseqConfig()
    cfg.common.cpu = True
    cfg.distributed_training.distributed_world_size = 1
    cfg.distributed_training.distributed_backend = "nccl"

    def train_alone(cfg, **kwargs):
        raise AssertionError("one of two torchrun processes trains alone")

    launched = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500", "WORLD_SIZE": "2", "RANK": "1", "LOCAL_RANK": "1"}
    with mock.patch.dict(os.environ, launched):
        expect_error(ValueError, "--distributed-backend gloo", distributed_utils.call_main, cfg, train_alone)


def fp16_on_cpu(work: Path) -> None:
    from fairseq import optim

    params = [torch.nn.Parameter(torch.zeros(3, dtype=torch.half))]
    flat = optim.FP16Optimizer.build_fp32_params(SimpleNamespace(), params, flatten=True)
    assert [p.device.type for p in flat.values()] == ["cpu"]


def interactive_input(work: Path) -> None:
    from fairseq_cli import interactive

    (work / "bom.txt").write_bytes(b"\xef\xbb\xbfIn the beginning\r\nGod\r\n")
    assert list(interactive.buffered_read(str(work / "bom.txt"), 10)) == [["In the beginning", "God"]]
    (work / "nul.txt").write_bytes(b"one\ntw\x00o\n")
    expect_error(ValueError, "nul.txt:2: byte 6", list, interactive.buffered_read(str(work / "nul.txt"), 10))


def numpy_compat_long(work: Path) -> None:
    from fairseq.data import TokenBlockDataset

    sentences = [torch.tensor([4, 5, 2]), torch.tensor([6, 2])]
    blocks = TokenBlockDataset(sentences, [3, 2], block_size=8, pad=1, eos=2, break_mode="eos")
    assert [blocks[i].tolist() for i in range(len(blocks))] == [[4, 5, 2], [6, 2]]


def save_dir_lock(work: Path) -> None:
    import fcntl

    from fairseq.dataclass.configs import CheckpointConfig, DistributedTrainingConfig
    from fairseq.trainer import Trainer

    # FairseqConfig()'s parts are shared defaults (another probe changes its rank): build fresh ones
    cfg = SimpleNamespace(
        checkpoint=CheckpointConfig(save_dir=str(work)), distributed_training=DistributedTrainingConfig()
    )
    with open(work / ".fairseq-train.lock", "w") as other_run:  # another open file: another run's lock
        fcntl.flock(other_run, fcntl.LOCK_EX | fcntl.LOCK_NB)
        expect_error(ValueError, "in use by another training", Trainer, cfg, None, None, None)


def full_disk_save(work: Path) -> None:
    import errno

    from fairseq import checkpoint_utils
    from fairseq.dataclass.configs import CheckpointConfig

    def full_disk(filename: str, extra_state: Any) -> None:
        Path(filename).write_bytes(b"half")
        raise OSError(errno.ENOSPC, "No space left on device")

    trainer = SimpleNamespace(
        data_parallel_rank=0,
        task=SimpleNamespace(),
        consolidate_optimizer=lambda: None,
        should_save_checkpoint_on_current_rank=True,
        get_num_updates=lambda: 3,
        checkpoint_suffix="",
        save_checkpoint=full_disk,
        state_dict=lambda: {"model": {"w": torch.zeros(4)}},
    )
    epoch_itr = SimpleNamespace(epoch=1, end_of_epoch=lambda: True, state_dict=lambda: {})
    cfg = CheckpointConfig(save_dir=str(work))
    expect_error(ValueError, "the disk holding", checkpoint_utils.save_checkpoint, cfg, trainer, epoch_itr, None)
    assert not list(work.glob("*.tmp*")), f"half-written files left: {sorted(work.iterdir())}"


def resumed_data(work: Path) -> None:
    from fairseq.data import Dictionary
    from fairseq.tasks import TASK_REGISTRY
    from fairseq.tasks.translation import TranslationConfig
    from fairseq.trainer import Trainer

    def task(symbols: List[str]) -> Any:
        dictionary = Dictionary()
        for symbol in symbols:
            dictionary.add_symbol(symbol)
        return TASK_REGISTRY["translation"](
            TranslationConfig(source_lang="en", target_lang="de"), dictionary, dictionary
        )

    torch.save({"task_state": task(["in", "the"]).state_dict()}, work / "checkpoint_last.pt")
    trainer = SimpleNamespace(task=task(["the", "in"]), cfg=SimpleNamespace(checkpoint=SimpleNamespace()))
    trainer.cfg.checkpoint.finetune_from_model = None
    expect_error(ValueError, "checkpoint_last.pt", Trainer.load_checkpoint, trainer, str(work / "checkpoint_last.pt"))


def patience_across_resume(work: Path) -> None:
    from fairseq.trainer import Trainer
    from fairseq_cli import train

    counter, saved = train.should_stop_early, {}
    counter.best, counter.num_runs = 4.25, 3
    trainer = object.__new__(train.Trainer)  # (its methods only: no model is built)
    with mock.patch.object(Trainer, "save_checkpoint", lambda self, name, extra_state: saved.update(extra_state)):
        trainer.save_checkpoint(str(work / "checkpoint_last.pt"), {"epoch": 2})
    counter.best, counter.num_runs = 5.0, 0  # what a new process would count from
    with mock.patch.object(Trainer, "load_checkpoint", lambda self, *args, **kwargs: saved):
        assert trainer.load_checkpoint(str(work / "checkpoint_last.pt"))["epoch"] == 2
    assert (counter.best, counter.num_runs) == (4.25, 3), "the patience count was not carried over"


def resumed_batches(work: Path) -> None:
    from fairseq.data import FairseqDataset
    from fairseq.tasks.fairseq_task import FairseqTask

    class Blocks(FairseqDataset):  # 64 blocks of 8 tokens, as a language model's training split
        sizes = np.full(64, 8)

        def __len__(self) -> int:
            return len(self.sizes)

        def __getitem__(self, index: int) -> int:
            return index

        def collater(self, samples: List[int]) -> List[int]:
            return samples

        def num_tokens(self, index: int) -> int:
            return 8

        def ordered_indices(self) -> np.ndarray:
            return np.lexsort([np.random.permutation(len(self)), self.sizes])

    def iterator(epoch: int) -> Any:
        return FairseqTask(SimpleNamespace()).get_batch_iterator(Blocks(), max_sentences=4, seed=1, epoch=epoch)

    uninterrupted, resumed = iterator(1), iterator(3)
    for _ in range(2):
        list(uninterrupted.next_epoch_itr())
    third, resumed_third = list(uninterrupted.next_epoch_itr()), list(resumed.next_epoch_itr())
    assert uninterrupted.epoch == resumed.epoch == 3, f"epochs {uninterrupted.epoch}, {resumed.epoch}"
    assert resumed_third == third, "a run resumed at epoch 3 trains on other batches than the run it continues"


def eval_lm_inputs(work: Path) -> None:
    from fairseq import options
    from fairseq.data import Dictionary
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf
    from fairseq.tasks.language_modeling import LanguageModelingConfig, LanguageModelingTask
    from fairseq_cli import eval_lm

    argv = [str(work), "--path", str(work / "lm.pt"), "--tokens-per-sample", "8", "--context-window", "8"]
    cfg = convert_namespace_to_omegaconf(options.parse_args_and_arch(options.get_eval_lm_parser(), argv))
    expect_error(ValueError, "--context-window 8 must be smaller than --tokens-per-sample 8", eval_lm.main, cfg)
    task = LanguageModelingTask(LanguageModelingConfig(tokens_per_sample=16), Dictionary())
    blocks = SimpleNamespace(sizes=np.array([16, 16, 3]))
    expect_error(ValueError, "the model has 8 positions", task.eval_lm_dataloader, blocks, max_positions=8)


def indexed_data_sizes(work: Path) -> None:
    from fairseq.data.indexed_dataset import MMapIndexedDataset, MMapIndexedDatasetBuilder

    builder = MMapIndexedDatasetBuilder(str(work / "test.bin"), dtype=np.int32)
    for sentence in ([4, 5, 2], [6, 7, 8, 2]):
        builder.add_item(torch.tensor(sentence))
    builder.finalize(str(work / "test.idx"))
    with open(work / "test.bin", "r+b") as data:
        data.truncate(12)
    expect_error(ValueError, "test.bin is cut short: it has 12 bytes", MMapIndexedDataset, str(work / "test"))


PROBES: Dict[str, Callable[[Path], None]] = {
    probe.__name__: probe
    for probe in (
        batch_by_size,
        ngram_blocking,
        checkpoint_loading,
        atomic_checkpoint_copy,
        cpu_ddp,
        bf16_without_tpu,
        preprocess_hint,
        restore_file,
        save_dir,
        model_loading,
        torchrun,
        fp16_on_cpu,
        interactive_input,
        numpy_compat_long,
        save_dir_lock,
        full_disk_save,
        resumed_data,
        patience_across_resume,
        resumed_batches,
        eval_lm_inputs,
        indexed_data_sizes,
    )
}


def run_probe(probe: Callable[[Path], None]) -> Optional[str]:
    with tempfile.TemporaryDirectory() as work:
        try:
            probe(Path(work))
        except Exception:
            return traceback.format_exc(limit=-2)
    return None


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("fixes", nargs="*", help=f"fixes to apply, in this order: {', '.join(FIXES)}")
    order = parser.parse_args(argv).fixes
    unknown = [name for name in order if name not in FIXES]
    if unknown:
        parser.error(f"unknown fixes {', '.join(unknown)}; the fixes are: {', '.join(FIXES)}")
    modules = fairseq_modules()
    changed = {}
    for name in order:
        before = fairseq_objects(modules)
        FIXES[name].apply()
        changed[name] = changed_objects(before, modules)
    probes = {name: run_probe(probe) for name, probe in PROBES.items()}
    print(json.dumps({"changed": changed, "probes": probes}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
