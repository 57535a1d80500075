"""attention_book.measure (chapter 10): timing, peak memory, the matmul ceiling."""

from __future__ import annotations

import pytest
import torch

from attention_book.cost import score_matrix_bytes
from attention_book.fused import FusedMultiHeadAttention
from attention_book.measure import (
    NOISY_SPREAD,
    REGIMES,
    Timing,
    compare,
    matmul_gflops,
    memory_bandwidth,
    peak_memory,
    plan_for,
    regime,
    regime_note,
    time_call,
    time_samples,
    timing_note,
    timing_warning,
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


def test_timing_statistics_are_the_median_and_the_quartiles():
    timing = Timing((5.0, 1.0, 2.0, 3.0, 4.0))
    assert timing.median == 3.0 and timing.best == 1.0
    assert (timing.q1, timing.q3, timing.iqr) == (2.0, 4.0, 2.0)
    assert timing.spread == 2.0 / 3.0 and timing.noisy
    steady = Timing((1.00, 1.01, 0.99, 1.00, 1.02))
    assert steady.spread < NOISY_SPREAD and not steady.noisy
    assert steady.milliseconds(1) == "1000.0 ms (IQR 1000.0-1010.0)"
    assert Timing((5.0, 1.0, 2.0, 3.0, 4.0)).milliseconds(0).endswith("⚠")
    one = Timing((0.5,))
    assert one.iqr == 0.0 and not one.noisy
    with pytest.raises(ValueError, match="at least one sample"):
        Timing(())


def test_a_single_interrupted_repeat_does_not_move_the_median():
    # what the busy machine did to the chapter: one repeat of seven took 20x longer
    quiet = Timing((1.80, 1.81, 1.79, 1.82, 1.80, 1.81, 1.80))
    busy = Timing((1.80, 1.81, 1.79, 36.0, 1.80, 1.81, 1.80))
    assert busy.median == quiet.median and not busy.noisy
    assert sum(busy.samples) / 7 > 3 * quiet.median  # the mean would have said 6.7


def test_time_samples_and_compare_interleave_the_calls():
    order = []
    timing = time_samples(lambda: order.append("x"), repeats=4, warmup=2)
    assert len(timing.samples) == 4 and len(order) == 6
    order.clear()
    timings = compare({"a": lambda: order.append("a"), "b": lambda: order.append("b")},
                      repeats=3, warmup=1)
    assert order == ["a", "b"] * 4  # one warm-up round, then three interleaved rounds
    assert set(timings) == {"a", "b"} and all(len(t.samples) == 3 for t in timings.values())


def test_timing_warning_names_the_noisy_timings():
    steady, noisy = Timing((1.0, 1.0, 1.01)), Timing((1.0, 2.0, 4.0, 1.0, 8.0))
    assert timing_warning([steady, steady]) == ""
    warning = timing_warning([steady, noisy], "KV-cache timings")
    assert warning.startswith("⚠ 1 of the 2 KV-cache timings are noisy")
    assert "counts" in warning
    assert timing_note([steady, noisy]) == timing_warning([steady, noisy])
    assert timing_note([steady], "KV-cache timings").startswith(
        "✓ All 1 KV-cache timings were steady")


@pytest.mark.parametrize("call, error, message", [
    (lambda: compare({}), TypeError, "non-empty dict"),
    (lambda: compare({"a": 3}), TypeError, "function without arguments"),
    (lambda: compare({"a": lambda: None}, repeats=0), ValueError, "repeats"),
    (lambda: time_samples(lambda: None, warmup=-1), ValueError, "warmup"),
])
def test_compare_errors(call, error, message):
    with pytest.raises(error, match=message):
        call()


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


# ---- what to measure on which device (issue 27), and which limit a time is at


def test_plan_for_a_cpu_keeps_the_chapters_small_sizes_in_float32_on_one_thread():
    plan = plan_for(torch.device("cpu"))
    assert plan == plan_for() == plan_for("cpu")
    assert (plan.dtype, plan.timer, plan.threads) == (torch.float32, "perf_counter", 1)
    assert plan.kernel_shape == (1, 4, 1024, 64)  # the causal-flag cell and its reference
    assert plan.sweep == ((1, 64, True), (1, 128, True), (1, 256, True), (1, 512, False))
    assert plan.curve_lengths == (64, 128, 256, 512) and plan.decode_lengths == (32, 128, 512)
    assert not plan.compile_flex
    before = torch.get_num_threads()
    try:
        plan.apply()
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)


@pytest.mark.parametrize("capability, dtype", [((7, 5), torch.float16), ((8, 0), torch.bfloat16),
                                               ((8, 6), torch.bfloat16), ((9, 0), torch.bfloat16),
                                               ((6, 1), torch.float16)])
def test_plan_for_a_gpu_fills_it_in_its_fastest_dtype_with_cuda_events(capability, dtype):
    plan = plan_for("cuda", capability=capability, memory_gib=80)
    assert plan.dtype == dtype and plan.timer == "cuda_events" and plan.threads is None
    batch, heads, tokens, head_dim = plan.kernel_shape
    assert batch * tokens >= 16384 and heads * head_dim == 768 and head_dim == 64
    for rows in (plan.sweep, plan.full_sweep):
        assert all(b * t >= 16384 for b, t, _ in rows)
    assert (plan.sweep_d_model, plan.sweep_heads) == (768, 12)
    assert (plan.decode_width, plan.decode_heads, plan.decode_layers) == (768, 12, 12)
    assert plan.compile_flex and min(plan.matmul_sizes) >= 4096
    assert f"{capability[0]}.{capability[1]}" in plan.description and plan.dtype_name in plan.description


def test_plan_for_a_small_gpu_times_from_scratch_attention_only_where_it_fits():
    # 4 float32 (B, 12, T, T) matrices within 60% of the memory: a 15 GiB T4 stops at 2,048
    t4 = plan_for("cuda", capability=(7, 5), memory_gib=15)
    assert [t for _, t, _ in t4.sweep] == [1024, 2048] and max(t4.curve_lengths) == 4096
    h100 = plan_for("cuda", capability=(9, 0), memory_gib=80)
    assert [t for _, t, _ in h100.sweep] == [1024, 2048, 4096] and max(h100.curve_lengths) == 8192
    assert max(t for _, t, _ in h100.full_sweep) == 8192
    for plan in (t4, h100):
        batch, heads, tokens, _ = plan.kernel_shape
        assert 4 * batch * heads * tokens**2 * 2 < 0.6 * 15 * 2**30  # the half-precision core fits a T4
    with pytest.raises(ValueError, match="memory_gib"):
        plan_for("cuda", capability=(9, 0), memory_gib=0)


def test_plan_for_errors():
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="capability"):
            plan_for("cuda")
    with pytest.raises(TypeError, match="capability"):
        plan_for("cuda", capability="8.0")


def test_cuda_events_need_a_cuda_device_and_unknown_timers_are_refused():
    with pytest.raises(ValueError, match="cuda_events"):
        time_samples(lambda: None, timer="cuda_events")
    with pytest.raises(ValueError, match="timer"):
        compare({"a": lambda: None}, timer="stopwatch")
    assert time_samples(lambda: None, repeats=2, timer="perf_counter").median >= 0


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_events_time_gpu_work():
    a = torch.randn(2048, 2048, device="cuda")
    timing = time_samples(lambda: a @ a, repeats=3, device="cuda")
    assert timing.median > 0


def test_regime_tells_overhead_compute_and_memory_apart():
    peak = 100e9  # FLOP/s
    # launches: the same calls on tiny tensors take 80% of the time
    assert regime(1e-3, 1e6, peak, fixed_seconds=0.8e-3) == "overhead-bound"
    # 50 GFLOP/s of 100: compute-bound; 5 of 100: memory-bound
    assert regime(1e-3, 50e6, peak, fixed_seconds=0.1e-3) == "compute-bound"
    assert regime(1e-3, 5e6, peak, fixed_seconds=0.1e-3) == "memory-bound"
    assert regime(1e-3, 5e6, peak) == "memory-bound"
    assert set(REGIMES) == {"overhead-bound", "compute-bound", "memory-bound"}
    note = regime_note("fused, T = 4096", 1e-3, 60e6, peak, fixed_seconds=1e-5)
    assert note.startswith("fused, T = 4096: compute-bound (60% of the matmul ceiling")
    assert "1%" in note


@pytest.mark.parametrize("kwargs, error, name", [
    (dict(seconds=0.0), ValueError, "seconds"),
    (dict(seconds="1"), TypeError, "seconds"),
    (dict(flops=-1), ValueError, "flops"),
    (dict(peak_flops=True), TypeError, "peak_flops"),
    (dict(fixed_seconds=-1e-3), ValueError, "fixed_seconds"),
])
def test_regime_errors(kwargs, error, name):
    arguments = dict(dict(seconds=1e-3, flops=1e6, peak_flops=1e9), **kwargs)
    with pytest.raises(error, match=name):
        regime(**arguments)
