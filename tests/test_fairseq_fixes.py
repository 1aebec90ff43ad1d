"""The plugin's fixes to fairseq: no sentence is silently dropped from batching."""
import numpy as np
from fairseq.data import data_utils

import user_dir  # noqa: F401  (applies the fixes)


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
