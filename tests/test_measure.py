"""attention_book.measure (chapter 10): timing, peak memory, the matmul ceiling."""

from __future__ import annotations

import pytest
import torch

from attention_book.cost import score_matrix_bytes
from attention_book.fused import FusedMultiHeadAttention
from attention_book.measure import (
    matmul_gflops,
    memory_bandwidth,
    peak_memory,
    time_call,
)
from attention_book.multihead import MultiHeadAttention


def test_time_call_returns_a_positive_time_and_calls_fn():
    calls = []
    seconds = time_call(lambda: calls.append(1), repeats=3, warmup=2)
    assert seconds >= 0 and len(calls) == 5
    assert time_call(lambda: None, repeats=2, statistic="min") >= 0


@pytest.mark.parametrize("kwargs, error, message", [
    (dict(fn=42), TypeError, "function without arguments"),
    (dict(repeats=0), ValueError, "repeats"),
    (dict(repeats=2.0), TypeError, "repeats"),
    (dict(warmup=-1), ValueError, "warmup"),
    (dict(warmup=1.5), TypeError, "warmup"),
    (dict(statistic="mean"), ValueError, "statistic"),
])
def test_time_call_errors(kwargs, error, message):
    kwargs = dict(dict(fn=lambda: None), **kwargs)
    with pytest.raises(error, match=message):
        time_call(**kwargs)


def test_peak_memory_sees_a_large_temporary():
    n = 256
    expected = n * n * 4

    def make_and_drop():
        big = torch.ones(n, n)  # freed before the function returns
        return big.sum()

    assert expected <= peak_memory(make_and_drop) < 2 * expected


def test_peak_memory_does_not_count_views_of_existing_tensors():
    existing = torch.randn(128, 128)
    assert peak_memory(lambda: existing[:10].view(-1).unsqueeze(0).t()) == 0


def test_peak_memory_quadratic_for_from_scratch_attention_not_fused():
    torch.manual_seed(0)
    scratch = MultiHeadAttention(32, 32, 512, 0.0, num_heads=4)
    fused = FusedMultiHeadAttention.from_module(scratch)
    with torch.no_grad():
        small, large = (peak_memory(lambda T=T: scratch(torch.randn(1, T, 32)))
                        for T in (128, 512))
        fused_large = peak_memory(lambda: fused(torch.randn(1, 512, 32)))
    assert large >= 2 * score_matrix_bytes(1, 512, 4)
    assert large > 8 * small  # (512 / 128)^2 = 16 for the T^2 part
    assert fused_large < score_matrix_bytes(1, 512, 4)


def test_peak_memory_rejects_non_callables():
    with pytest.raises(TypeError, match="function without arguments"):
        peak_memory(torch.ones(3))


def test_matmul_gflops_is_positive_in_any_float_dtype():
    assert matmul_gflops(size=64, repeats=2) > 0
    assert matmul_gflops(size=64, repeats=2, dtype=torch.bfloat16) > 0
    with pytest.raises(TypeError, match="torch.dtype"):
        matmul_gflops(size=64, dtype="bfloat16")


def test_memory_bandwidth_is_positive():
    assert memory_bandwidth(num_bytes=2**20, repeats=2) > 0
    with pytest.raises(ValueError, match="num_bytes"):
        memory_bandwidth(num_bytes=0)
