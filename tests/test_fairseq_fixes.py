"""The plugin's fixes to fairseq: what each fixes, and how they are applied and switched off."""
import os
import subprocess
import sys

import numpy as np
import pytest
import torch
from fairseq.data import data_utils
from fairseq.models import distributed_fairseq_model
from torch.nn.parallel import DistributedDataParallel

import user_dir  # noqa: F401  (applies the fixes)
from ode_seq.fairseq_fixes import FIXES, apply_fixes, check_fairseq_version, disabled_fixes
from ode_seq.fairseq_fixes.last_batch import keeping_every_index
from ode_seq.fairseq_fixes.ngram_blocking import block_repeated_ngrams
from tests.e2e.cli import ROOT


def test_batch_by_size_keeps_the_longest_sentences_fairseq_would_drop():
    sizes = np.array([3, 5, 9, 10, 10, 2, 7, 4, 10, 6, 8, 3], dtype=np.int64)
    order = np.argsort(sizes, kind="mergesort")
    batches = data_utils.batch_by_size(
        order, lambda i: sizes[i], max_tokens=1000, required_batch_size_multiple=8
    )
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


def _batches_missing(missing, fixed_shapes=None):
    """A stand-in for fairseq's batching that leaves ``missing`` out of its batches."""

    def batch_by_size(indices, num_tokens_fn, num_tokens_vec=None, max_tokens=None,
                      max_sentences=None, required_batch_size_multiple=1, fixed_shapes=None):
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
    with pytest.raises(RuntimeError, match=r"written for fairseq 0\.12\.2, 0\.12\.3, 0\.12\.3\.1, "
                       r"but fairseq 0\.13\.0 is installed.*ODE_SEQ_DISABLE_FIXES=all"):
        check_fairseq_version("0.13.0")


def test_a_switched_off_fix_is_not_applied_and_the_others_are():
    code = (
        "import logging; logging.basicConfig(level=logging.INFO)\n"
        "import user_dir\n"
        "from fairseq.data import data_utils\n"
        "print('WRAPPED', hasattr(data_utils.batch_by_size, '__wrapped__'))\n"
    )
    env = dict(os.environ, ODE_SEQ_DISABLE_FIXES="batch_by_size")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            cwd=ROOT, env=env)
    assert "WRAPPED False" in result.stdout, result.stderr[-2000:]
    applied = [line for line in result.stderr.splitlines() if "applied fixes" in line]
    assert len(applied) == 1 and "ngram_blocking" in applied[0]
    assert "switched off batch_by_size" in applied[0]


def test_data_parallel_wrapper_is_a_subclass_of_torch_ddp():
    ddp = distributed_fairseq_model.DistributedDataParallel
    assert isinstance(ddp, type) and issubclass(ddp, DistributedDataParallel)


@pytest.mark.parametrize("precision, tpu", [
    (["--bf16"], False), (["--bf16", "--cpu"], False), (["--memory-efficient-bf16"], False),
    (["--bf16", "--tpu"], True), (["--fp16"], False),
])
def test_bf16_leaves_the_tpu_path_off_unless_tpu_is_given(precision, tpu):
    from fairseq import options

    args = options.parse_args_and_arch(options.get_training_parser(), [
        "data", "--user-dir", os.path.join(ROOT, "user_dir"), "--arch", "ode_transformer_euler_small",
        "--optimizer", "adam", *precision])
    assert args.tpu is tpu
