"""The plugin's fixes to fairseq: no sentence is silently dropped from batching."""
import numpy as np
import pytest
import torch
from fairseq.data import data_utils

import user_dir  # noqa: F401  (applies the fixes)
from user_dir.fairseq_fixes import block_repeated_ngrams


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
