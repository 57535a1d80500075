"""attention_book.kv_cache (chapter 10): cached decoding equals a full forward pass."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attention_book.kv_cache import CachedMultiHeadAttention, KVCache
from attention_book.multihead import MultiHeadAttention

FAST = settings(max_examples=25, deadline=None)


@FAST
@given(st.integers(1, 4), st.integers(1, 6), st.integers(1, 9), st.integers(1, 3),
       st.booleans(), st.integers(0, 2**16), st.data())
def test_kv_cache_decoding_equals_full_recompute(heads, head_dim, T, B, bias, seed, data):
    torch.manual_seed(seed)
    module = CachedMultiHeadAttention(5, heads * head_dim, T + 2, 0.0, heads,
                                      qkv_bias=bias).eval()
    x = torch.randn(B, T, 5)
    full = module(x)
    prompt = data.draw(st.integers(1, T))  # prefill a prompt, then one token at a time
    cache = KVCache()
    pieces = [module(x[:, :prompt], cache=cache)]
    for t in range(prompt, T):
        pieces.append(module(x[:, t:t + 1], cache=cache))
    assert len(cache) == T
    torch.testing.assert_close(torch.cat(pieces, dim=1), full, atol=1e-5, rtol=1e-5)


def test_weights_of_one_new_token_cover_all_earlier_tokens():
    torch.manual_seed(0)
    module = CachedMultiHeadAttention(4, 4, 8, 0.0, 2)
    cache = KVCache()
    module(torch.randn(1, 5, 4), cache=cache)
    _, weights = module(torch.randn(1, 1, 4), cache=cache, return_weights=True)
    assert weights.shape == (1, 2, 1, 6)
    assert (weights > 0).all()  # the newest token sees every cached one
    torch.testing.assert_close(weights.sum(-1), torch.ones(1, 2, 1))


def test_cache_does_not_keep_the_autograd_graph():
    # issue 11: outside no_grad the cache used to hold every step's graph
    torch.manual_seed(0)
    module = CachedMultiHeadAttention(4, 4, 8, 0.0, 2)
    cache = KVCache()
    for _ in range(3):
        out = module(torch.randn(1, 1, 4), cache=cache)
    assert out.requires_grad  # gradients still reach this step's projections
    assert cache.keys.grad_fn is None and not cache.keys.requires_grad
    assert cache.values.grad_fn is None and not cache.values.requires_grad
    out.sum().backward()
    assert module.W_key.weight.grad is not None


def test_cache_checks_dtype_and_device():
    cache = KVCache()
    cache.append(torch.randn(1, 2, 3, 4), torch.randn(1, 2, 3, 4))
    double = torch.randn(1, 2, 1, 4, dtype=torch.float64)
    with pytest.raises(TypeError, match="dtype"):
        cache.append(double, double)
    with pytest.raises(TypeError, match="dtype"):
        KVCache().append(torch.randn(1, 2, 1, 4), double)
    meta = torch.empty(1, 2, 1, 4, device="meta")
    with pytest.raises(ValueError, match="device"):
        cache.append(meta, meta)
    assert len(cache) == 3  # nothing appended by the failed calls


@pytest.mark.parametrize("call, error, message", [
    (lambda m, c: m(torch.randn(1, 2, 4), cache=c), ValueError, "context_length=4"),
    (lambda m, c: c.append(torch.randn(2, 2, 1, 2), torch.randn(2, 2, 1, 2)),
     ValueError, "batch size, heads and head_dim"),
    (lambda m, c: KVCache().append(torch.randn(1, 3, 2), torch.randn(1, 3, 2)),
     ValueError, r"\(B, H, t_new, head_dim\)"),
    (lambda m, c: KVCache().append(torch.randn(1, 1, 3, 2), torch.randn(1, 1, 2, 2)),
     ValueError, "same shape"),
    (lambda m, c: KVCache().append([1.0], [1.0]), TypeError, "torch.Tensor"),
    (lambda m, c: m(torch.randn(1, 1, 4), cache={}), TypeError, "KVCache"),
    (lambda m, c: m(torch.randn(1, 1, 5), cache=c), ValueError, "d_in=4"),
    (lambda m, c: m(torch.randn(1, 1, 4), cache=c,
                    key_padding_mask=torch.zeros(1, 1, dtype=torch.bool)),
     ValueError, "key_padding_mask"),
])
def test_errors_name_the_argument_and_the_fix(call, error, message):
    module = CachedMultiHeadAttention(4, 4, 4, 0.0, 2)
    cache = KVCache()
    module(torch.randn(1, 3, 4), cache=cache)
    with pytest.raises(error, match=message):
        call(module, cache)


def test_bidirectional_module_refuses_a_cache():
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
    assert repr(KVCache()) == "KVCache(empty)"
