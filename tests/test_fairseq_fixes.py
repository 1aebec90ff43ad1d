"""The plugin's fixes to fairseq: what each fixes, and how they are applied and switched off."""

import json
import os
import random
import subprocess
import sys
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from fairseq.data import data_utils
from fairseq.models import distributed_fairseq_model
from fairseq.ngram_repeat_block import NGramRepeatBlock
from fairseq.sequence_generator import SequenceGenerator
from torch.nn.parallel import DistributedDataParallel

import user_dir  # noqa: F401  (applies the fixes)
from ode_seq.fairseq_fixes import FIXES, FairseqFix, apply_fixes, check_fairseq_version, disabled_fixes, fix_registry
from ode_seq.fairseq_fixes.last_batch import keeping_every_index
from ode_seq.fairseq_fixes.model_loading import check_direction
from ode_seq.fairseq_fixes.ngram_blocking import IntendedNGramRepeatBlock, block_repeated_ngrams
from ode_seq.fairseq_fixes.restore_file import check_resume_source
from ode_seq.fairseq_fixes.torchrun import join_launched_processes
from tests.conftest import TinyTask, build_model, random_batch
from tests.e2e.cli import ROOT
from tests.fairseq_fix_probes import PROBES


def test_batch_by_size_keeps_the_longest_sentences_fairseq_would_drop():
    sizes = np.array([3, 5, 9, 10, 10, 2, 7, 4, 10, 6, 8, 3], dtype=np.int64)
    order = np.argsort(sizes, kind="mergesort")
    batches = data_utils.batch_by_size(order, lambda i: sizes[i], max_tokens=1000, required_batch_size_multiple=8)
    assert [len(b) for b in batches] == [8, 4]
    assert sorted(np.concatenate(batches).tolist()) == list(range(12))
    assert set(batches[-1].tolist()) == {2, 3, 4, 8}  # the four longest


def test_batch_by_size_leaves_complete_batchings_unchanged():
    sizes = np.arange(1, 17, dtype=np.int64)
    batches = data_utils.batch_by_size(
        np.arange(16), lambda i: sizes[i], max_tokens=1000, required_batch_size_multiple=8
    )
    assert [b.tolist() for b in batches] == [list(range(16))]


@pytest.mark.parametrize("n", [1, 2, 3])
def test_ngram_blocker_bans_exactly_the_tokens_that_would_repeat_an_ngram(n):
    generator = torch.Generator().manual_seed(n)
    tokens = torch.randint(0, 4, (6, 12), generator=generator)
    for step in range(10):
        lprobs = torch.zeros(6, 5)
        block_repeated_ngrams(tokens, lprobs, step, n)
        for row in range(6):
            seq = tokens[row, : step + 1].tolist()
            suffix = seq[step + 2 - n :] if n > 1 else []
            banned = {seq[i + n - 1] for i in range(step + 2 - n) if seq[i : i + n - 1] == suffix}
            assert {t for t in range(5) if lprobs[row, t] == float("-inf")} == banned, (n, step, row)


def _repeated_bigrams(tokens: torch.Tensor) -> int:
    bigrams = list(zip(tokens.tolist(), tokens.tolist()[1:]))
    return len(bigrams) - len(set(bigrams))


def test_sequence_generator_with_ngram_blocking_compiles_with_torchscript_and_blocks_there_too(tmp_path):
    task = TinyTask(vocab=6)
    model = build_model("transformer", task).eval()
    src, lengths, _ = random_batch(task, [7, 5, 9], seed=2)
    sample = {"net_input": {"src_tokens": src, "src_lengths": lengths}}
    generator = SequenceGenerator([model], task.target_dictionary, beam_size=2, no_repeat_ngram_size=2, max_len_b=12)
    assert isinstance(generator.repeat_ngram_blocker, IntendedNGramRepeatBlock)
    torch.jit.script(generator).save(str(tmp_path / "generator.pt"))
    scripted = torch.jit.load(str(tmp_path / "generator.pt"))
    with torch.no_grad():
        eager_hypotheses, scripted_hypotheses = generator(sample), scripted(sample)
        generator.repeat_ngram_blocker = NGramRepeatBlock(2, use_extension=False)
        unblocked = generator(sample)
    for eager, compiled in zip(eager_hypotheses, scripted_hypotheses):
        for a, b in zip(eager, compiled):
            assert torch.equal(a["tokens"], b["tokens"]) and _repeated_bigrams(a["tokens"]) == 0
    # fairseq's own blocker lets this model repeat bigrams: the check above is not vacuous
    assert sum(_repeated_bigrams(h["tokens"]) for hypotheses in unblocked for h in hypotheses) > 0


def _batches_missing(missing, fixed_shapes=None):
    """A stand-in for fairseq's batching that leaves ``missing`` out of its batches."""

    def batch_by_size(
        indices,
        num_tokens_fn,
        num_tokens_vec=None,
        max_tokens=None,
        max_sentences=None,
        required_batch_size_multiple=1,
        fixed_shapes=None,
    ):
        kept = [int(i) for i in indices if int(i) not in missing]
        return [np.array(kept[::2]), np.array(kept[1::2])]

    return keeping_every_index(batch_by_size)


def test_batch_by_size_fix_adds_exactly_the_left_out_indices_wherever_they_are():
    batches = _batches_missing({7, 2})(np.array([5, 7, 1, 2, 9, 4]), None)
    assert [b.tolist() for b in batches] == [[5, 9], [1, 4], [7, 2]]


def test_batch_by_size_fix_leaves_fixed_shape_batching_alone():
    batches = _batches_missing({7, 2})(np.array([5, 7, 1, 2, 9, 4]), None, fixed_shapes=[(2, 8)])
    assert [b.tolist() for b in batches] == [[5, 9], [1, 4]]
    sizes = np.array([3, 5, 9, 10, 10, 2, 7, 4, 10, 6, 8, 3, 5], dtype=np.int64)
    order = np.argsort(sizes, kind="mergesort")
    args = (order, lambda i: sizes[i])
    kwargs = dict(max_tokens=1000, required_batch_size_multiple=8, fixed_shapes=[(4, 10)])
    assert data_utils.batch_by_size(*args, **kwargs) == data_utils.batch_by_size.__wrapped__(*args, **kwargs)


def test_fixes_are_switched_off_by_name_or_all_and_unknown_names_are_refused():
    assert disabled_fixes("") == []
    assert disabled_fixes(" batch_by_size, ngram_blocking ") == ["batch_by_size", "ngram_blocking"]
    assert disabled_fixes("all") == list(FIXES)
    with pytest.raises(ValueError, match=r"unknown fixes ngram; the fixes are: batch_by_size, "):
        disabled_fixes("ngram")


def test_every_fix_names_its_bug_and_applies_once():
    for name, fix in FIXES.items():
        assert fix.name == name and len(type(fix).__doc__) > 100
    assert apply_fixes() == list(FIXES)  # already applied by user_dir: nothing is wrapped twice
    assert not hasattr(data_utils.batch_by_size.__wrapped__, "__wrapped__")


def test_fixes_refuse_a_fairseq_version_they_were_not_written_for():
    for version in ("0.12.2", "0.12.3", "0.12.3.1"):
        check_fairseq_version(version)
    with pytest.raises(
        RuntimeError,
        match=r"written for fairseq 0\.12\.2, 0\.12\.3, 0\.12\.3\.1, "
        r"but fairseq 0\.13\.0 is installed.*ODE_SEQ_DISABLE_FIXES=all",
    ):
        check_fairseq_version("0.13.0")


def test_a_switched_off_fix_is_not_applied_and_the_others_are():
    code = (
        "import logging; logging.basicConfig(level=logging.INFO)\n"
        "import user_dir\n"
        "from fairseq.data import data_utils\n"
        "print('WRAPPED', hasattr(data_utils.batch_by_size, '__wrapped__'))\n"
    )
    env = dict(os.environ, ODE_SEQ_DISABLE_FIXES="batch_by_size")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=env)
    assert "WRAPPED False" in result.stdout, result.stderr[-2000:]
    applied = [line for line in result.stderr.splitlines() if "applied fixes" in line]
    assert len(applied) == 1 and "ngram_blocking" in applied[0]
    assert "switched off batch_by_size" in applied[0]
    changing = [name for name, fix in FIXES.items() if fix.changes_working_runs and name != "batch_by_size"]
    assert "ngram_blocking" in changing and "save_dir" not in changing
    assert f"; these change runs of any architecture, ODE or not: {', '.join(changing)} (" in applied[0]


def _fix_patching(name, *patches):
    return type(name, (FairseqFix,), {"name": name, "patches": patches, "__doc__": name})()


def test_no_two_fixes_patch_the_same_fairseq_object():
    declared = [target for fix in FIXES.values() for target in fix.patches]
    assert len(declared) == len(set(declared)) and all(target.startswith("fairseq") for target in declared)
    fix_registry([_fix_patching("a", "fairseq.x.f"), _fix_patching("b", "fairseq.x.g")])
    with pytest.raises(ValueError, match=r"fairseq fixes a and b both patch fairseq\.x\.f: each fairseq object"):
        fix_registry([_fix_patching("a", "fairseq.x.f"), _fix_patching("b", "fairseq.x.g", "fairseq.x.f")])
    with pytest.raises(ValueError, match=r"two fairseq fixes are named a"):
        fix_registry([_fix_patching("a"), _fix_patching("a")])


def _fixes_applied_in_a_fresh_process(order):
    """What tests/fairseq_fix_probes.py reports after applying ``order``: changes and probes."""
    command = [sys.executable, "-m", "tests.fairseq_fix_probes", *order]
    result = subprocess.run(
        command, capture_output=True, text=True, cwd=ROOT, env=dict(os.environ, OMP_NUM_THREADS="1")
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout)


def _shuffled(names):
    order = list(names)
    random.Random(0).shuffle(order)
    assert order not in (list(names), list(names)[::-1])
    return order


@pytest.mark.parametrize(
    "order", [list(FIXES), list(FIXES)[::-1], _shuffled(FIXES)], ids=["registry order", "reversed", "shuffled"]
)
def test_each_fix_works_and_changes_only_what_it_declares_whatever_the_order(order):
    assert set(PROBES) == set(FIXES), "add a probe of each new fix's behaviour to tests/fairseq_fix_probes.py"
    report = _fixes_applied_in_a_fresh_process(order)
    for name in order:
        assert report["changed"][name] == sorted(FIXES[name].patches), f"{name} (applied in order {order})"
        assert report["probes"][name] is None, f"{name} (applied in order {order}):\n{report['probes'][name]}"


def test_every_probe_of_a_fix_fails_on_fairseq_without_the_fixes():
    report = _fixes_applied_in_a_fresh_process([])
    assert report["changed"] == {}
    assert [name for name, failure in report["probes"].items() if failure is None] == []


def test_data_parallel_wrapper_is_a_subclass_of_torch_ddp():
    ddp = distributed_fairseq_model.DistributedDataParallel
    assert isinstance(ddp, type) and issubclass(ddp, DistributedDataParallel)


@pytest.mark.parametrize(
    "precision, tpu",
    [
        (["--bf16"], False),
        (["--bf16", "--cpu"], False),
        (["--memory-efficient-bf16"], False),
        (["--bf16", "--tpu"], True),
        (["--fp16"], False),
    ],
)
def test_bf16_leaves_the_tpu_path_off_unless_tpu_is_given(precision, tpu):
    from fairseq import options

    args = options.parse_args_and_arch(
        options.get_training_parser(),
        [
            "data",
            "--user-dir",
            os.path.join(ROOT, "user_dir"),
            "--arch",
            "ode_transformer_euler_small",
            "--optimizer",
            "adam",
            *precision,
        ],
    )
    assert args.tpu is tpu


def _checkpoint_options(save_dir, **options):
    """fairseq's checkpoint options with their defaults and ``options``."""
    return SimpleNamespace(
        **{
            "save_dir": str(save_dir),
            "restore_file": "checkpoint_last.pt",
            "continue_once": None,
            "finetune_from_model": None,
            **options,
        }
    )


def test_a_run_is_resumed_only_from_a_checkpoint_that_exists(tmp_path):
    check_resume_source(_checkpoint_options(tmp_path / "new-run"))
    (tmp_path / "checkpoint_last.pt").write_bytes(b"saved")
    check_resume_source(_checkpoint_options(tmp_path))
    check_resume_source(_checkpoint_options(tmp_path, restore_file=str(tmp_path / "checkpoint_last.pt")))
    with pytest.raises(
        ValueError,
        match=r"--restore-file \S+chekpoint_last\.pt does not exist: .*"
        r"nothing was trained or written.*leave out --restore-file",
    ):
        check_resume_source(_checkpoint_options(tmp_path, restore_file=str(tmp_path / "chekpoint_last.pt")))
    with pytest.raises(ValueError, match=r"--restore-file \S+ is a directory; name a checkpoint file"):
        check_resume_source(_checkpoint_options(tmp_path, restore_file=str(tmp_path)))
    check_resume_source(_checkpoint_options(tmp_path, continue_once=str(tmp_path / "gone.pt")))  # resumes
    with pytest.raises(
        ValueError,
        match=r"--restore-file \./checkpoint_last\.pt does not exist \(the path "
        r"is not relative to --save-dir: did you mean \S+/checkpoint_last\.pt\?\)",
    ):
        check_resume_source(_checkpoint_options(tmp_path, restore_file=os.path.join(".", "checkpoint_last.pt")))


def test_a_save_dir_with_checkpoints_but_no_checkpoint_last_is_not_trained_over(tmp_path):
    (tmp_path / "checkpoint3.pt").write_bytes(b"saved")
    with pytest.raises(ValueError, match=r"holds checkpoints \(checkpoint3\.pt\) but no checkpoint_last\.pt"):
        check_resume_source(_checkpoint_options(tmp_path))
    with pytest.raises(ValueError, match=r"--continue-once \S+gone\.pt does not exist"):
        check_resume_source(_checkpoint_options(tmp_path, continue_once=str(tmp_path / "gone.pt")))
    check_resume_source(_checkpoint_options(tmp_path, restore_file=str(tmp_path / "checkpoint3.pt")))
    check_resume_source(_checkpoint_options(tmp_path, finetune_from_model=str(tmp_path / "checkpoint3.pt")))


TORCHRUN = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500", "WORLD_SIZE": "2", "RANK": "1", "LOCAL_RANK": "1"}


def _launch_options(cpu=True, **distributed):
    """fairseq's config as far as launching is concerned: defaults of a CPU run and ``distributed``."""
    defaults = dict(
        distributed_init_method=None,
        distributed_world_size=1,
        distributed_rank=0,
        device_id=0,
        distributed_no_spawn=False,
        distributed_backend="gloo",
    )
    return SimpleNamespace(
        common=SimpleNamespace(cpu=cpu), distributed_training=SimpleNamespace(**{**defaults, **distributed})
    )


def test_processes_started_by_torchrun_take_world_size_and_rank_from_it(monkeypatch):
    for name, value in TORCHRUN.items():
        monkeypatch.setenv(name, value)
    cfg = _launch_options()
    join_launched_processes(cfg)
    assert vars(cfg.distributed_training) == dict(
        distributed_init_method="env://",
        distributed_world_size=2,
        distributed_rank=1,
        device_id=0,
        distributed_no_spawn=True,
        distributed_backend="gloo",
    )


def test_torchrun_processes_that_would_train_alone_or_use_nccl_on_cpus_are_refused(monkeypatch):
    for name, value in TORCHRUN.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(
        ValueError,
        match=r"torchrun started 2 processes \(WORLD_SIZE=2, RANK=1\), but "
        r"--distributed-init-method tcp://\S+ with world size 1 and rank 0 would make each "
        r"process train on its own .* leave out --distributed-init-method",
    ):
        join_launched_processes(_launch_options(distributed_init_method="tcp://127.0.0.1:29501"))
    with pytest.raises(
        ValueError,
        match=r"--distributed-backend nccl needs CUDA GPUs, but this run is on "
        r"CPUs: pass --distributed-backend gloo",
    ):
        join_launched_processes(_launch_options(distributed_backend="nccl"))


def test_without_torchrun_the_launch_settings_are_left_alone(monkeypatch):
    for name in TORCHRUN:
        monkeypatch.delenv(name, raising=False)
    cfg = _launch_options()
    before = dict(vars(cfg.distributed_training))
    join_launched_processes(cfg)
    assert vars(cfg.distributed_training) == before


def _translating(source, target):
    return SimpleNamespace(cfg=SimpleNamespace(source_lang=source, target_lang=target))


def test_a_run_reading_the_checkpoints_languages_the_other_way_round_is_refused():
    with pytest.raises(
        ValueError,
        match=r"m\.pt was trained to translate en -> de, but this run reads de "
        r"as the source and en as the target .* pass -s en -t de",
    ):
        check_direction("m.pt", ("en", "de"), _translating("de", "en"))
    check_direction("m.pt", ("en", "de"), _translating("en", "de"))
    check_direction("m.pt", None, _translating("de", "en"))  # an old checkpoint that does not say
