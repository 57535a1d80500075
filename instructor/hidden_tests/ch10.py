"""Hidden tests of chapter 10 (instructor only: never copied to the book or the student release).

Format: see attention_book.instructor.hidden (and instructor/README.md). Each test gets the
student's namespace ``ns`` and raises Hint("what is wrong and how to fix it") when it fails.
"""

import math
import numbers

import torch

from attention_book.instructor.hidden import Hint, RemoteNamespace, answer, hidden_test


def _flops(B, T, d):
    return 4 * 2 * B * T * d * d + 2 * 2 * B * T * T * d


def _count(attention_flops, B, T, d, H):
    value = attention_flops(B, T, d, H)
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        value = value.item()
    if not isinstance(value, numbers.Real) or isinstance(value, bool):
        raise Hint(f"attention_flops should return a number, got {type(value).__name__}")
    return value


# ---------------------------------------------------------------- ex-10-flops


@hidden_test("ex-10-flops", "sizes the self-check does not use (T = 1, head_dim = 1, long sequences)")
def flops_other_sizes(ns):
    attention_flops = answer(ns, "attention_flops")
    for B, T, d, H in ((1, 1, 8, 2), (4, 3, 6, 6), (2, 4096, 64, 4), (5, 2, 1536, 24), (1, 131072, 4096, 32)):
        value, expected = _count(attention_flops, B, T, d, H), _flops(B, T, d)
        if not math.isclose(float(value), expected, rel_tol=1e-9):
            raise Hint(f"for B={B}, T={T}, d={d}, H={H} expected {expected:,} FLOPs, got {value:,}: write the "
                       "general formula in B, T and d (four projections of 2*B*T*d*d, two T x T products "
                       "of 2*B*T*T*d), not numbers that fit the self-check's cases")


@hidden_test("ex-10-flops", "counted without the course package's own cost functions", guard=True)
def flops_without_package(student, reference):
    if "attention_book" in student.source:
        raise Hint("write the count yourself: the answer must not use attention_book's own cost functions")
    answer(RemoteNamespace(student), "attention_flops")

# ---------------------------------------------------------------- ex-10-kv-step


def _randn(*shape, seed, scale=1.0, dtype=torch.float32):
    return scale * torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


def _reference_step(query, new_key, new_value, cache_keys, cache_values):
    keys = torch.cat([cache_keys, new_key], dim=-2)
    values = torch.cat([cache_values, new_value], dim=-2)
    weights = torch.softmax(query @ keys.transpose(-2, -1) / query.shape[-1] ** 0.5, dim=-1)
    return weights @ values, keys, values


def _step(decode_step, *tensors):
    out = decode_step(*[t.clone() for t in tensors])
    if not isinstance(out, (tuple, list)) or len(out) != 3 or not all(isinstance(t, torch.Tensor) for t in out):
        raise Hint("decode_step should return three tensors (context, keys, values)")
    return [t.detach() for t in out]


@hidden_test("ex-10-kv-step", "one sequence, one head, head_dim 1 (sizes of 1 everywhere)")
def kv_sizes_of_one(ns):
    decode_step = answer(ns, "decode_step")
    for B, H, t, hd in ((1, 1, 1, 1), (1, 1, 3, 2), (3, 1, 2, 1)):
        tensors = [_randn(B, H, 1, hd, seed=s) for s in (1, 2, 3)]
        tensors += [_randn(B, H, t, hd, seed=4), _randn(B, H, t, hd, seed=5)]
        got = _step(decode_step, *tensors)
        want = _reference_step(*tensors)
        for name, g, w in zip(("context", "keys", "values"), got, want):
            if tuple(g.shape) != tuple(w.shape):
                raise Hint(f"with B={B}, H={H}, t={t}, hd={hd} the {name} should have shape {tuple(w.shape)}, "
                           f"got {tuple(g.shape)}: keep every dimension (no .squeeze()) and concatenate "
                           "along dim=-2")
            if not torch.allclose(g, w, atol=1e-5):
                raise Hint(f"with B={B}, H={H}, t={t}, hd={hd} the {name} are wrong: scale by "
                           "query.shape[-1] ** 0.5 and attend over the cache followed by the new token")


@hidden_test("ex-10-kv-step", "large scores and a long float64 cache")
def kv_large_float64(ns):
    decode_step = answer(ns, "decode_step")
    B, H, t, hd = 2, 2, 40, 8
    tensors = [_randn(B, H, 1, hd, seed=6, scale=40.0, dtype=torch.float64),
               _randn(B, H, 1, hd, seed=7, scale=40.0, dtype=torch.float64),
               _randn(B, H, 1, hd, seed=8, dtype=torch.float64),
               _randn(B, H, t, hd, seed=9, scale=40.0, dtype=torch.float64),
               _randn(B, H, t, hd, seed=10, dtype=torch.float64)]
    context, keys, values = _step(decode_step, *tensors)
    if not torch.isfinite(context).all():
        raise Hint("scores in the hundreds gave inf or nan: use torch.softmax (or subtract the maximum "
                   "before torch.exp) instead of exp(scores) / sum")
    if context.dtype != torch.float64 or keys.dtype != torch.float64:
        raise Hint(f"float64 inputs must give float64 outputs, got {context.dtype}: do not convert the dtype "
                   "or build the cache with a default-dtype torch.zeros(...)")
    want = _reference_step(*tensors)
    if not (torch.allclose(context, want[0], atol=1e-8) and torch.equal(keys, want[1])
            and torch.equal(values, want[2])):
        raise Hint(f"with a cache of {t} tokens and large scores the result differs from softmax(q k^T / "
                   "sqrt(hd)) @ v over the cache followed by the new token")


# ---------------------------------------------------------------- ex-10-chunk-mask


def _chunk_mask(student, reference, num_new, num_cached):
    got = student.call("chunk_mask", num_new, num_cached)
    want = reference.call("chunk_mask", num_new, num_cached)
    shape = (num_new, num_cached + num_new)
    if not isinstance(got, torch.Tensor) or tuple(got.shape) != shape:
        found = tuple(got.shape) if isinstance(got, torch.Tensor) else type(got).__name__
        raise Hint(f"chunk_mask({num_new}, {num_cached}) must have shape {shape}, got {found}")
    if got.dtype != torch.bool:
        raise Hint(f"the mask must be boolean (True = hidden), got {got.dtype}")
    if not torch.equal(got, want):
        raise Hint(f"chunk_mask({num_new}, {num_cached}) hides the wrong keys: new token i sits at position "
                   f"num_cached + i, so it sees keys 0 .. num_cached + i (torch.triu(..., diagonal=num_cached + 1))")


@hidden_test("ex-10-chunk-mask", "sizes the self-check does not use (1 new token, long caches, no cache)")
def chunk_other_sizes(student, reference):
    for num_new, num_cached in ((1, 0), (1, 9), (3, 0), (4, 7), (6, 2)):
        _chunk_mask(student, reference, num_new, num_cached)


@hidden_test("ex-10-chunk-mask", "a chunk longer than the cache")
def chunk_long(student, reference):
    _chunk_mask(student, reference, 9, 3)
