"""Tests of attention_book.scale (chapter 9): fused path, cost model, measuring helpers, KV cache."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from attention_book.multihead import MultiHeadAttention
from attention_book.scale import (
    CachedMultiHeadAttention,
    FusedMultiHeadAttention,
    KVCache,
    attention_flops,
    direct_sdpa,
    matmul_gflops,
    peak_memory,
    score_matrix_bytes,
    time_call,
)

FAST = settings(max_examples=25, deadline=None)


@st.composite
def configs(draw):
    num_heads = draw(st.integers(1, 4))
    head_dim = draw(st.integers(1, 8))
    d_out = num_heads * head_dim
    d_in = draw(st.integers(1, 8))
    num_tokens = draw(st.integers(1, 9))
    batch_size = draw(st.integers(1, 3))
    seed = draw(st.integers(0, 2**16))
    config = dict(d_in=d_in, d_out=d_out, context_length=num_tokens + draw(st.integers(0, 3)),
                  dropout=0.0, num_heads=num_heads, qkv_bias=draw(st.booleans()),
                  causal=draw(st.booleans()))
    x = torch.randn(batch_size, num_tokens, d_in, generator=torch.Generator().manual_seed(seed))
    torch.manual_seed(seed)
    return config, x


# ---------------------------------------------------------------- fused path
@FAST
@given(configs())
def test_fused_equals_from_scratch(case):
    config, x = case
    scratch = MultiHeadAttention(**config)
    fused = FusedMultiHeadAttention(**config)
    fused.load_state_dict(scratch.state_dict())
    torch.testing.assert_close(fused(x), scratch(x), atol=1e-5, rtol=1e-5)


@FAST
@given(configs())
def test_fused_gradients_equal_from_scratch(case):
    config, x = case
    scratch = MultiHeadAttention(**config)
    fused = FusedMultiHeadAttention.from_module(scratch)
    x1, x2 = x.clone().requires_grad_(), x.clone().requires_grad_()
    scratch(x1).square().sum().backward()
    fused(x2).square().sum().backward()
    torch.testing.assert_close(x2.grad, x1.grad, atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(fused.W_query.weight.grad, scratch.W_query.weight.grad, atol=1e-5, rtol=1e-4)


def test_fused_in_eval_mode_ignores_dropout():
    torch.manual_seed(0)
    scratch = MultiHeadAttention(6, 6, 5, dropout=0.5, num_heads=2).eval()
    fused = FusedMultiHeadAttention.from_module(scratch)
    assert not fused.training
    x = torch.randn(2, 5, 6)
    torch.testing.assert_close(fused(x), scratch(x), atol=1e-5, rtol=1e-5)


def test_fused_dropout_is_active_in_training_mode():
    torch.manual_seed(0)
    fused = FusedMultiHeadAttention(6, 6, 5, dropout=0.5, num_heads=2)
    x = torch.randn(2, 5, 6)
    torch.manual_seed(1)
    first = fused(x)
    torch.manual_seed(2)
    second = fused(x)
    assert not torch.allclose(first, second), "dropout in training mode should change the output"
    torch.testing.assert_close(fused.eval()(x), fused(x))


def test_fused_and_from_scratch_share_state_dict_keys():
    scratch = MultiHeadAttention(4, 4, 3, 0.0, 2)
    fused = FusedMultiHeadAttention(4, 4, 3, 0.0, 2)
    assert list(fused.state_dict()) == list(scratch.state_dict())


def test_direct_sdpa_equals_fused_module():
    torch.manual_seed(3)
    fused = FusedMultiHeadAttention(8, 12, 7, 0.0, num_heads=3, qkv_bias=True)
    x = torch.randn(2, 7, 8)
    torch.testing.assert_close(direct_sdpa(fused, x), fused(x))


def test_fused_refuses_return_weights_with_a_fix():
    fused = FusedMultiHeadAttention(4, 4, 3, 0.0, 2)
    with pytest.raises(ValueError, match="MultiHeadAttention"):
        fused(torch.randn(1, 3, 4), return_weights=True)


def test_fused_checks_its_input():
    fused = FusedMultiHeadAttention(4, 4, 3, 0.0, 2)
    with pytest.raises(ValueError, match="context_length"):
        fused(torch.randn(1, 5, 4))
    with pytest.raises(ValueError, match="d_in=4"):
        fused(torch.randn(1, 3, 5))


def test_from_module_rejects_other_modules():
    with pytest.raises(TypeError, match="MultiHeadAttention"):
        FusedMultiHeadAttention.from_module(torch.nn.Linear(3, 3))


# ---------------------------------------------------------------- cost model
def test_attention_flops_counts_matrix_products():
    B, T, d, H = 2, 10, 12, 3
    projections = 4 * 2 * B * T * d * d
    core = 2 * 2 * B * T * T * d
    assert attention_flops(B, T, d, H) == projections + core
    assert attention_flops(B, T, d, H, projections=False) == core
    assert attention_flops(B, T, d, H, causal=True, projections=False) == 2 * 2 * B * (T * (T + 1) // 2) * d


def test_attention_flops_do_not_depend_on_the_number_of_heads():
    assert attention_flops(1, 64, 48, 1) == attention_flops(1, 64, 48, 12)


def test_attention_flops_core_is_quadratic_in_tokens():
    one = attention_flops(1, 100, 16, 2, projections=False)
    assert attention_flops(1, 200, 16, 2, projections=False) == 4 * one


def test_attention_flops_errors_say_how_to_fix():
    with pytest.raises(ValueError, match="choose num_heads from"):
        attention_flops(1, 8, 10, 3)
    with pytest.raises(TypeError, match="num_tokens must be an int"):
        attention_flops(1, 8.0, 12, 3)
    with pytest.raises(ValueError, match="at least 1"):
        attention_flops(0, 8, 12, 3)


def test_score_matrix_bytes():
    assert score_matrix_bytes(8, 1024, 12) == 8 * 12 * 1024 * 1024 * 4
    assert score_matrix_bytes(1, 10, 2, dtype=torch.bfloat16) == 2 * 100 * 2
    with pytest.raises(TypeError, match="torch.dtype"):
        score_matrix_bytes(1, 10, 2, dtype="float32")


# ---------------------------------------------------------------- measuring
def test_time_call_returns_a_positive_median_and_calls_fn():
    calls = []
    seconds = time_call(lambda: calls.append(1), repeats=3, warmup=2)
    assert seconds >= 0 and len(calls) == 5


def test_time_call_errors():
    with pytest.raises(TypeError, match="function without arguments"):
        time_call(42)
    with pytest.raises(ValueError, match="repeats must be at least 1"):
        time_call(lambda: None, repeats=0)
    with pytest.raises(ValueError, match="warmup"):
        time_call(lambda: None, warmup=-1)


def test_peak_memory_sees_a_large_temporary():
    n = 256
    expected = n * n * 4

    def make_and_drop():
        big = torch.ones(n, n)  # 256 KiB, freed before the function returns
        return big.sum()

    peak = peak_memory(make_and_drop)
    assert expected <= peak < 2 * expected


def test_peak_memory_does_not_count_views_of_existing_tensors():
    existing = torch.randn(128, 128)
    assert peak_memory(lambda: existing[:10].view(-1).unsqueeze(0).t()) == 0


def test_peak_memory_grows_quadratically_for_from_scratch_attention_not_fused():
    torch.manual_seed(0)
    scratch = MultiHeadAttention(32, 32, 512, 0.0, num_heads=4)
    fused = FusedMultiHeadAttention.from_module(scratch)
    with torch.no_grad():
        small, large = (peak_memory(lambda T=T: scratch(torch.randn(1, T, 32))) for T in (128, 512))
        fused_large = peak_memory(lambda: fused(torch.randn(1, 512, 32)))
    assert large >= 2 * score_matrix_bytes(1, 512, 4)  # scores and weights alive at once
    assert large > 8 * small  # (512 / 128)^2 = 16 for the T^2 part
    assert fused_large < score_matrix_bytes(1, 512, 4)  # no (T, T) matrix at all


def test_peak_memory_rejects_non_callables():
    with pytest.raises(TypeError, match="function without arguments"):
        peak_memory(torch.ones(3))


def test_matmul_gflops_is_positive():
    assert matmul_gflops(size=64, repeats=2) > 0


# ---------------------------------------------------------------- KV cache
@FAST
@given(configs(), st.data())
def test_kv_cache_decoding_equals_full_recompute(case, data):
    config, x = case
    config = dict(config, causal=True)
    module = CachedMultiHeadAttention(**config).eval()
    full = module(x)  # (B, T, d_out)
    T = x.shape[1]
    prompt = data.draw(st.integers(1, T))  # prefill a prompt, then one token at a time
    cache = KVCache()
    pieces = [module(x[:, :prompt], cache=cache)]
    for t in range(prompt, T):
        pieces.append(module(x[:, t:t + 1], cache=cache))
    assert len(cache) == T
    torch.testing.assert_close(torch.cat(pieces, dim=1), full, atol=1e-5, rtol=1e-5)


def test_kv_cache_weights_of_one_new_token_cover_all_earlier_tokens():
    torch.manual_seed(0)
    module = CachedMultiHeadAttention(4, 4, 8, 0.0, 2)
    cache = KVCache()
    module(torch.randn(1, 5, 4), cache=cache)
    _, weights = module(torch.randn(1, 1, 4), cache=cache, return_weights=True)
    assert weights.shape == (1, 2, 1, 6)
    torch.testing.assert_close(weights.sum(-1), torch.ones(1, 2, 1))


def test_kv_cache_errors():
    module = CachedMultiHeadAttention(4, 4, 4, 0.0, 2)
    cache = KVCache()
    module(torch.randn(1, 3, 4), cache=cache)
    with pytest.raises(ValueError, match="context_length=4"):
        module(torch.randn(1, 2, 4), cache=cache)
    with pytest.raises(ValueError, match="batch size, heads and head_dim"):
        cache.append(torch.randn(2, 2, 1, 2), torch.randn(2, 2, 1, 2))
    with pytest.raises(ValueError, match=r"\(B, H, t_new, head_dim\)"):
        KVCache().append(torch.randn(1, 3, 2), torch.randn(1, 3, 2))
    with pytest.raises(TypeError, match="KVCache"):
        module(torch.randn(1, 1, 4), cache={})
    bidirectional = CachedMultiHeadAttention(4, 4, 4, 0.0, 2, causal=False)
    with pytest.raises(ValueError, match="causal=True"):
        bidirectional(torch.randn(1, 1, 4), cache=KVCache())


def test_cached_module_without_cache_is_multihead_attention():
    torch.manual_seed(0)
    cached = CachedMultiHeadAttention(4, 4, 4, 0.0, 2)
    plain = MultiHeadAttention(4, 4, 4, 0.0, 2)
    plain.load_state_dict(cached.state_dict())
    x = torch.randn(2, 4, 4)
    torch.testing.assert_close(cached(x), plain(x))


def test_sdpa_is_the_same_math_as_the_chapter_formula():
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 3, 6, 4) for _ in range(3))
    hide = torch.triu(torch.ones(6, 6, dtype=torch.bool), diagonal=1)
    scratch = torch.softmax((q @ k.transpose(-2, -1)).masked_fill(hide, -math.inf) / 2.0, dim=-1) @ v
    torch.testing.assert_close(F.scaled_dot_product_attention(q, k, v, is_causal=True), scratch,
                               atol=1e-6, rtol=1e-5)


# ---------------------------------------------------------------- benchmark helpers
def test_implementations_agree_except_the_wrapper_without_out_proj():
    from attention_book.scale import IMPLEMENTATIONS, attention_implementations

    functions = attention_implementations(d_model=16, num_heads=4, context_length=6)
    x = torch.randn(2, 6, 16)
    with torch.no_grad():
        reference = functions["MultiHeadAttention (weight split)"](x)
        for name in IMPLEMENTATIONS[2:]:
            torch.testing.assert_close(functions[name](x), reference, atol=1e-5, rtol=1e-5)
        assert functions[IMPLEMENTATIONS[0]](x).shape == reference.shape


def test_sweep_and_table():
    from attention_book.scale import Table, benchmark_table, markdown_table, sweep

    rows = sweep([8], batch_size=1, d_model=8, num_heads=2, repeats=1,
                 skip=lambda T, pass_name, name: name.startswith("wrapper") and pass_name != "forward")
    assert [row["pass_name"] for row in rows] == ["forward", "forward+backward"]
    assert "wrapper (one head at a time)" not in rows[1]["seconds"]
    assert rows[1]["flops"] == 3 * rows[0]["flops"]
    table = benchmark_table(rows)
    assert isinstance(table, Table) and len(table.rows) == 2
    assert "skipped" in table.rows[1] and "1.0x" in " ".join(table.rows[0])
    assert markdown_table(rows).count("\n") == 3  # header, rule, two rows
    assert repr(table) == "<Table: 2 rows x 7 columns>"
    assert table._repr_html_().count("<tr>") == 3


def test_table_and_sweep_errors():
    from attention_book.scale import Table, benchmark_attention, sweep

    with pytest.raises(ValueError, match="the header has 2"):
        Table(["a", "b"], [[1, 2, 3]])
    with pytest.raises(ValueError, match="passes must be"):
        sweep([8], d_model=8, num_heads=2, passes=["backward"])
    with pytest.raises(ValueError, match="choose from"):
        benchmark_attention(8, d_model=8, num_heads=2, names=["flash"])
    with pytest.raises(ValueError, match="statistic"):
        time_call(lambda: None, statistic="mean")
