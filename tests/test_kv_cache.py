"""attention_book.kv_cache (chapter 10): cached decoding equals a full forward pass."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attention_book.kv_cache import (
    AttentionStack,
    CachedMultiHeadAttention,
    KVCache,
    StaticKVCache,
    capture_step,
)
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



# ---- the cut overhead (issue 27): a preallocated cache, checks once, a fixed-shape step


@FAST
@given(st.integers(1, 3), st.integers(1, 4), st.integers(2, 9), st.integers(1, 2),
       st.integers(0, 2**16), st.data())
def test_static_cache_and_unchecked_steps_equal_the_full_pass(heads, head_dim, T, B, seed, data):
    torch.manual_seed(seed)
    module = CachedMultiHeadAttention(5, heads * head_dim, T, 0.0, heads).eval()
    x = torch.randn(B, T, 5)
    full = module(x)
    prompt = data.draw(st.integers(1, T - 1))
    chunk = data.draw(st.integers(1, T - prompt))  # several new tokens at once, then one by one
    for cache in (StaticKVCache(T), KVCache()):
        pieces = [module(x[:, :prompt], cache=cache), module.step(x[:, prompt:prompt + chunk], cache)]
        for t in range(prompt + chunk, T):
            pieces.append(module.step(x[:, t:t + 1], cache))
        assert len(cache) == T
        torch.testing.assert_close(torch.cat(pieces, dim=1), full, atol=1e-5, rtol=1e-5)


def test_step_at_equals_step_at_every_position_without_growing_the_cache():
    torch.manual_seed(1)
    module = CachedMultiHeadAttention(6, 6, 8, 0.0, 3).eval()
    x = torch.randn(2, 8, 6)
    full = module(x)
    cache = StaticKVCache(8)
    module(x[:, :3], cache=cache)  # the prefill allocates the buffers
    for t in range(3, 8):
        out = module.step_at(x[:, t:t + 1], cache, torch.tensor([t]))
        torch.testing.assert_close(out, full[:, t:t + 1], atol=1e-5, rtol=1e-5)
    assert len(cache) == 3  # the caller tracks the position
    assert cache.key_buffer.shape == (2, 3, 8, 2)


def test_static_cache_writes_in_place_and_truncates():
    cache = StaticKVCache(max_tokens=5)
    assert len(cache) == 0 and cache.keys is None and repr(cache) == "StaticKVCache(empty)"
    keys, values = torch.randn(1, 2, 3, 4), torch.randn(1, 2, 3, 4)
    all_keys, _ = cache.append(keys, values)
    buffer = cache.key_buffer
    cache.append(torch.randn(1, 2, 1, 4), torch.randn(1, 2, 1, 4))
    assert cache.key_buffer is buffer and len(cache) == 4  # no new tensor
    torch.testing.assert_close(cache.keys[:, :, :3], keys)
    cache.truncate(2)
    assert len(cache) == 2 and cache.keys.shape == (1, 2, 2, 4)
    with pytest.raises(ValueError, match="max_tokens=5"):
        cache.append(torch.randn(1, 2, 4, 4), torch.randn(1, 2, 4, 4))
    assert len(cache) == 2  # nothing written by the failed call
    plain = KVCache()
    plain.append(keys, values)
    plain.truncate(1)
    assert len(plain) == 1
    for bad, error in ((3, ValueError), (-1, ValueError), (1.0, TypeError)):
        with pytest.raises(error, match="num_tokens"):
            plain.truncate(bad)


def test_static_cache_keeps_the_graph_of_the_current_step_only():
    torch.manual_seed(0)
    module = CachedMultiHeadAttention(4, 4, 8, 0.0, 2)
    cache = StaticKVCache(8)
    for _ in range(3):
        out = module(torch.randn(1, 1, 4), cache=cache)
    assert not cache.key_buffer.requires_grad
    out.sum().backward()
    assert module.W_key.weight.grad is not None


def test_return_weights_takes_the_core_and_agrees_with_the_fast_step():
    torch.manual_seed(2)
    module = CachedMultiHeadAttention(4, 4, 8, 0.0, 2).eval()
    x = torch.randn(1, 6, 4)
    first, second = KVCache(), KVCache()
    module(x[:, :3], cache=first), module(x[:, :3], cache=second)
    fast = module(x[:, 3:], cache=first)
    slow, weights = module(x[:, 3:], cache=second, return_weights=True)
    torch.testing.assert_close(fast, slow, atol=1e-6, rtol=1e-5)
    assert weights.shape == (1, 2, 3, 6)
    assert (weights[..., 0, 4:] == 0).all() and (weights[..., 2, :] > 0).all()  # lower right


def test_attention_stack_checks_once_and_its_three_steps_agree():
    torch.manual_seed(3)
    stack = AttentionStack(8, 2, 3, 10).eval()
    text = torch.randn(1, 10, 8)
    with torch.no_grad():
        expected = stack(text)[:, -1:]
        outputs = []
        for static in (False, True):
            caches = stack.new_caches(static=static)
            stack(text[:, :9], caches)
            outputs.append(stack.step(text[:, 9:], caches))
            for cache in caches:
                cache.truncate(9)
            outputs.append(stack(text[:, 9:], caches))
        outputs.append(stack.step_at(text[:, 9:], caches, torch.tensor([9])))
    for out in outputs:
        torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)
    with pytest.raises(ValueError, match="caches"):
        stack.step(text[:, 9:], caches[:2])
    for cache in caches:
        cache.truncate(9)
    caches[1].truncate(3)
    with pytest.raises(ValueError, match="same tokens"):
        stack.step(text[:, 9:], caches)


def test_capture_step_needs_cuda_tensors():
    with pytest.raises(ValueError, match="CUDA"):
        capture_step(lambda x: x + 1, [torch.zeros(2)])


@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA graphs need a CUDA GPU")
def test_a_captured_step_replays_the_eager_step():
    torch.manual_seed(4)
    stack = AttentionStack(16, 2, 2, 12).cuda().eval()
    text = torch.randn(1, 12, 16, device="cuda")
    with torch.no_grad():
        expected = stack(text)
        caches = stack.new_caches(static=True)
        stack(text[:, :4], caches)
        position = torch.tensor([4], device="cuda")
        replay = capture_step(lambda x, p: stack.step_at(x, caches, p), [text[:, 4:5], position])
        for t in range(4, 12):
            out = replay(text[:, t:t + 1], torch.tensor([t], device="cuda"))
            torch.testing.assert_close(out, expected[:, t:t + 1], atol=1e-4, rtol=1e-4)
