"""The benchmarks' CPU peak-memory measurement, the ratio of paired rounds, and the refusal of a size below one."""

import pytest
import torch

from benchmarks.measure import median_ratio, peak_extra_bytes
from benchmarks.settings import parse_settings


def test_cpu_peak_memory_is_the_largest_running_sum_of_allocations():
    def allocate():
        a = torch.empty(1_000_000)  # 4 MB
        b = torch.empty(2_000_000)  # +8 MB = 12 MB live: the peak
        del a
        c = torch.empty(500_000)  # 10 MB live
        del b, c

    assert peak_extra_bytes(allocate, torch.device("cpu")) == 12_000_000


def test_cpu_peak_memory_is_not_lowered_by_freeing_blocks_of_an_earlier_measurement():
    kept = []
    peak_extra_bytes(lambda: kept.append(torch.empty(3_000_000)), torch.device("cpu"))
    assert len(kept) == 2  # 24 MB allocated while an earlier measurement was recording

    def free_earlier_then_allocate():
        kept.clear()
        a = torch.empty(1_000_000)
        b = torch.empty(2_000_000)
        del a, b

    assert peak_extra_bytes(free_earlier_then_allocate, torch.device("cpu")) == 12_000_000


def test_median_ratio_pairs_rounds_before_taking_the_median():
    assert median_ratio([2.0, 4.0, 100.0], [1.0, 2.0, 10.0]) == 2.0


def test_a_size_below_one_is_refused_naming_its_flag(capsys):
    with pytest.raises(SystemExit):
        parse_settings(["--smoke", "--lm-prompt-len", "0", "--rounds", "0", "--warmup", "0", "--seed", "0"])
    error = capsys.readouterr().err.splitlines()[-1]
    assert error.endswith("error: --lm-prompt-len must be >= 1; --rounds must be >= 1")
