"""attention_book.gqa (chapter 10): grouped-query attention, with RoPE and a KV cache."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attention_book.functional import scaled_dot_product_attention
from attention_book.gqa import GroupedQueryAttention, repeat_kv
from attention_book.kv_cache import KVCache
from attention_book.multihead import MultiHeadAttention
from attention_book.positions import next_positions, positions_from_padding

FAST = settings(max_examples=25, deadline=None)


@FAST
@given(st.integers(1, 4), st.integers(1, 4), st.integers(1, 8), st.integers(1, 3),
       st.booleans(), st.booleans(), st.integers(0, 2**16))
def test_gqa_with_one_key_head_per_query_head_equals_multihead(heads, head_dim, T, B, bias, causal,
                                                                seed):
    torch.manual_seed(seed)
    mha = MultiHeadAttention(5, heads * head_dim, 8, 0.0, heads, qkv_bias=bias, causal=causal).eval()
    gqa = GroupedQueryAttention.from_multihead(mha).eval()
    assert gqa.num_kv_heads == heads and gqa.groups == 1
    x = torch.randn(B, T, 5)
    torch.testing.assert_close(gqa(x), mha(x), atol=1e-6, rtol=1e-5)


def test_repeat_kv_gives_each_group_its_shared_head():
    kv = torch.arange(2 * 3 * 1 * 1, dtype=torch.float32).view(2, 3, 1, 1)  # (B, H_kv=3, T, hd)
    repeated = repeat_kv(kv, 2)
    assert repeated.shape == (2, 6, 1, 1)
    assert repeated[0, :, 0, 0].tolist() == [0, 0, 1, 1, 2, 2]
    assert repeat_kv(kv, 1) is kv


def test_gqa_equals_attention_over_repeated_heads_and_mqa_shares_one():
    torch.manual_seed(0)
    x = torch.randn(2, 6, 16)
    for kv_heads in (1, 2, 4):
        module = GroupedQueryAttention(16, 16, 6, 0.0, num_heads=4, num_kv_heads=kv_heads).eval()
        assert module.W_key.weight.shape == (kv_heads * 4, 16)
        output, weights = module(x, return_weights=True)
        q = module.W_query(x).view(2, 6, 4, 4).transpose(1, 2)
        k = module.W_key(x).view(2, 6, kv_heads, 4).transpose(1, 2)
        v = module.W_value(x).view(2, 6, kv_heads, 4).transpose(1, 2)
        hide = torch.triu(torch.ones(6, 6, dtype=torch.bool), diagonal=1)
        g = 4 // kv_heads
        context, expected = scaled_dot_product_attention(
            q, k.repeat_interleave(g, 1), v.repeat_interleave(g, 1), mask=hide)
        torch.testing.assert_close(weights, expected)
        torch.testing.assert_close(output, module.out_proj(context.transpose(1, 2).reshape(2, 6, 16)))
        if kv_heads == 1:  # multi-query: every head attends with the same keys
            scores = weights.detach()
            assert not torch.allclose(scores[:, 0], scores[:, 1])  # different queries ...
            torch.testing.assert_close(k.expand(-1, 4, -1, -1), k.repeat_interleave(4, 1))


@FAST
@given(st.sampled_from([(4, 4), (4, 2), (4, 1), (6, 3)]), st.integers(1, 9), st.integers(1, 2),
       st.integers(0, 2**16), st.data())
def test_cached_decoding_with_rope_equals_full_recompute(heads, T, B, seed, data):
    num_heads, num_kv_heads = heads
    torch.manual_seed(seed)
    module = GroupedQueryAttention(8, num_heads * 2, 10, 0.0, num_heads, num_kv_heads,
                                   rope=True).eval()
    x = torch.randn(B, T, 8)
    full = module(x)
    prompt = data.draw(st.integers(1, T))
    cache = KVCache()
    pieces = [module(x[:, :prompt], cache=cache)]
    pieces += [module(x[:, t:t + 1], cache=cache) for t in range(prompt, T)]
    torch.testing.assert_close(torch.cat(pieces, dim=1), full, atol=1e-5, rtol=1e-5)
    assert cache.keys.shape == (B, num_kv_heads, T, 2)  # the cache holds the shared heads only


def test_rope_scores_in_the_module_depend_on_offsets_only():
    torch.manual_seed(1)
    module = GroupedQueryAttention(8, 8, 40, 0.0, 2, rope=True).eval()
    x = torch.randn(1, 5, 8)
    _, at_zero = module(x, positions=torch.arange(5), return_weights=True)
    _, shifted = module(x, positions=torch.arange(30, 35), return_weights=True)
    torch.testing.assert_close(at_zero, shifted, atol=1e-5, rtol=1e-5)


def test_left_padding_with_position_ids_and_a_cache_equals_each_sequence_alone():
    torch.manual_seed(2)
    module = GroupedQueryAttention(8, 8, 12, 0.0, 4, num_kv_heads=2, rope=True).eval()
    short, long_ = torch.randn(1, 3, 8), torch.randn(1, 5, 8)
    batch = torch.cat([torch.cat([torch.zeros(1, 2, 8), short], dim=1), long_])  # (2, 5, 8)
    padding = torch.tensor([[True, True, False, False, False], [False] * 5])
    positions = positions_from_padding(padding)
    cache = KVCache()
    prefill = module(batch, key_padding_mask=padding, positions=positions, cache=cache)
    new = torch.randn(2, 1, 8)
    padding = torch.cat([padding, torch.zeros(2, 1, dtype=torch.bool)], dim=1)
    step = module(new, key_padding_mask=padding, positions=next_positions(positions), cache=cache)
    alone_short = module(torch.cat([short, new[:1]], dim=1))
    alone_long = module(torch.cat([long_, new[1:]], dim=1))
    torch.testing.assert_close(prefill[0, 2:], alone_short[0, :3], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(step[0], alone_short[0, 3:], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(step[1], alone_long[0, 5:], atol=1e-5, rtol=1e-5)
    # continuing at len(cache) instead of each sequence's own next position is wrong for the
    # padded sequence (its new token would sit 3 positions too far from its words)
    cache2 = KVCache()
    module(batch, key_padding_mask=padding[:, :5], positions=positions, cache=cache2)
    wrong = module(new, key_padding_mask=padding, cache=cache2)
    assert not torch.allclose(wrong[0], alone_short[0, 3:], atol=1e-4)
    torch.testing.assert_close(wrong[1], alone_long[0, 5:], atol=1e-5, rtol=1e-5)


def test_gradients_reach_every_projection():
    module = GroupedQueryAttention(8, 8, 6, 0.0, 4, num_kv_heads=2, rope=True)
    module(torch.randn(2, 6, 8)).sum().backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in module.parameters())


@pytest.mark.parametrize("call, error, message", [
    (lambda: GroupedQueryAttention(8, 8, 6, 0.0, 4, num_kv_heads=3), ValueError, "num_kv_heads=3"),
    (lambda: GroupedQueryAttention(8, 6, 6, 0.0, 4), ValueError, "d_out=6"),
    (lambda: GroupedQueryAttention(8, 6, 6, 0.0, 2, rope=True), ValueError, "even head_dim"),
    (lambda: GroupedQueryAttention(8, 8, 6, 0.0, 4, rope="yes"), TypeError, "rope"),
    (lambda: GroupedQueryAttention(8, 8, 6, 0.0, 4)(torch.randn(1, 7, 8)), ValueError, "context_length"),
    (lambda: GroupedQueryAttention(8, 8, 6, 0.0, 4)(torch.randn(1, 3, 8), positions=torch.arange(3)),
     ValueError, "rope=True"),
    (lambda: GroupedQueryAttention(8, 8, 6, 0.0, 4)(torch.randn(1, 3, 8), cache=[]), TypeError, "KVCache"),
    (lambda: GroupedQueryAttention(8, 8, 6, 0.0, 4, causal=False)(torch.randn(1, 3, 8), cache=KVCache()),
     ValueError, "causal=True"),
    (lambda: GroupedQueryAttention(8, 8, 6, 0.0, 4)(torch.randn(1, 3, 8),
                                                   key_padding_mask=torch.zeros(1, 4, dtype=torch.bool)),
     ValueError, "key_padding_mask"),
    (lambda: repeat_kv(torch.randn(2, 3, 4), 2), ValueError, "keys_or_values"),
    (lambda: repeat_kv(torch.randn(1, 2, 3, 4), 0), ValueError, "groups"),
    (lambda: GroupedQueryAttention.from_multihead(torch.nn.Linear(2, 2)), TypeError, "MultiHeadAttention"),
])
def test_errors_name_the_argument(call, error, message):
    with pytest.raises(error, match=message):
        call()
