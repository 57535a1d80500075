"""Hidden tests of chapter 10 (instructor only: never copied to the book or the student release).

Format: see attention_book.instructor.hidden (and instructor/README.md). Each test gets the
student's namespace ``ns`` and raises Hint("what is wrong and how to fix it") when it fails.
"""

import math
import numbers

import torch

from attention_book.instructor.hidden import Hint, RemoteNamespace, answer, hidden_test, randn, same


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


@hidden_test("ex-10-kv-step", "main values: B 2, 2 heads, a cache of 5 tokens")
def kv_main(student, reference):
    tensors = [randn(2, 2, 1, 4, seed=s) for s in (61, 62, 63)] + [randn(2, 2, 5, 4, seed=64),
                                                                   randn(2, 2, 5, 4, seed=65)]
    same(student.call("decode_step", *tensors), reference.call("decode_step", *tensors),
         "decode_step(query, new_key, new_value, cache_keys, cache_values)",
         hint="append the new key and value to the cache (dim=-2), then the query attends to all of them, "
              "scaled by 1/sqrt(head_dim), without a causal mask (the new token sees the whole cache)")


@hidden_test("ex-10-kv-step", "one sequence, one head, head_dim 1 (sizes of 1 everywhere)")
def kv_sizes_of_one(ns):
    decode_step = answer(ns, "decode_step")
    for B, H, t, hd in ((1, 1, 1, 1), (1, 1, 3, 2), (3, 1, 2, 1)):
        tensors = [randn(B, H, 1, hd, seed=s) for s in (1, 2, 3)]
        tensors += [randn(B, H, t, hd, seed=4), randn(B, H, t, hd, seed=5)]
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
    tensors = [randn(B, H, 1, hd, seed=6, scale=40.0, dtype=torch.float64),
               randn(B, H, 1, hd, seed=7, scale=40.0, dtype=torch.float64),
               randn(B, H, 1, hd, seed=8, dtype=torch.float64),
               randn(B, H, t, hd, seed=9, scale=40.0, dtype=torch.float64),
               randn(B, H, t, hd, seed=10, dtype=torch.float64)]
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


# ---------------------------------------------------------------- ex-10-rope


def _rotate(x, positions):
    """Pairs of neighbours turned by position * 10000 ** (-2 i / head_dim), in float64."""
    head_dim = x.shape[-1]
    theta = 10_000.0 ** (-torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
    angles = positions.double()[:, None] * theta
    a, b = x.double()[..., 0::2], x.double()[..., 1::2]
    turned = torch.stack((a * torch.cos(angles) - b * torch.sin(angles),
                          a * torch.sin(angles) + b * torch.cos(angles)), dim=-1)
    return turned.flatten(-2).to(x.dtype)


@hidden_test("ex-10-rope", "long positions, a wide head, float64 (the self-check's sizes differ)")
def rope_long_positions(student, reference):
    x = randn(1, 2, 4, 64, seed=41, dtype=torch.float64)
    positions = torch.tensor([1000, 1001, 1002, 4095])
    got = student.call("rotate", x, positions)
    if not isinstance(got, torch.Tensor) or tuple(got.shape) != tuple(x.shape):
        raise Hint(f"rotate(x, positions) must return a tensor of x's shape {tuple(x.shape)}")
    if got.dtype != torch.float64:
        raise Hint(f"a float64 x must give a float64 result, got {got.dtype}")
    # float32 angles (as in the chapter) round positions in the thousands to about 1e-4 rad
    if not torch.allclose(got, _rotate(x, positions), atol=5e-3):
        raise Hint("for positions in the thousands and head_dim 64 the rotation is wrong: pair "
                   "(2i, 2i + 1) turns by position * 10000 ** (-2 * i / head_dim), with the "
                   "positions given (not 0 .. T - 1)")


@hidden_test("ex-10-rope", "the smallest head (2 numbers, one pair) and a single token")
def rope_one_pair(student, reference):
    x = torch.tensor([[0.6, 0.8]])  # one token, one pair
    got = student.call("rotate", x, torch.tensor([2]))
    want = torch.tensor([[0.6 * math.cos(2) - 0.8 * math.sin(2), 0.6 * math.sin(2) + 0.8 * math.cos(2)]])
    if not isinstance(got, torch.Tensor) or not torch.allclose(got.float(), want, atol=1e-5):
        raise Hint("one pair (0.6, 0.8) at position 2 must turn by 2 radians counter-clockwise "
                   f"to {want.flatten().tolist()}; got {got if not isinstance(got, torch.Tensor) else got.tolist()}")


@hidden_test("ex-10-rope", "x left unchanged", guard=True)
def rope_no_mutation(student, reference):
    x = randn(2, 3, 6, seed=42)
    _, after = student.call_after("rotate", x, torch.arange(3))
    if not torch.equal(after["args"][0], x):
        raise Hint("rotate changed x in place: build a new tensor")


# ---------------------------------------------------------------- ex-10-gqa


def _grouped(queries, keys, values):
    groups = queries.shape[1] // keys.shape[1]
    keys = keys.repeat_interleave(groups, dim=1)
    values = values.repeat_interleave(groups, dim=1)
    T = queries.shape[-2]
    hide = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
    scores = (queries @ keys.transpose(-2, -1) / queries.shape[-1] ** 0.5).masked_fill(hide, float("-inf"))
    return torch.softmax(scores, dim=-1) @ values


@hidden_test("ex-10-gqa", "groups of 4 and of 8, one token, float64")
def gqa_other_groupings(student, reference):
    for B, H, H_kv, T, hd in ((2, 8, 2, 7, 4), (1, 8, 1, 1, 2), (3, 12, 3, 5, 6)):
        q = randn(B, H, T, hd, seed=51, dtype=torch.float64)
        k = randn(B, H_kv, T, hd, seed=52, dtype=torch.float64)
        v = randn(B, H_kv, T, hd, seed=53, dtype=torch.float64)
        got = student.call("grouped_attention", q, k, v)
        if not isinstance(got, torch.Tensor) or tuple(got.shape) != (B, H, T, hd):
            raise Hint(f"with {H} query heads and {H_kv} key/value heads the result must have shape "
                       f"{(B, H, T, hd)}")
        if not torch.allclose(got.double(), _grouped(q, k, v), atol=1e-8):
            raise Hint(f"with {H} query heads and {H_kv} key/value heads (groups of {H // H_kv}) the "
                       "context is wrong: query head h reads key/value head h // groups, causal, scaled "
                       "by 1/sqrt(head_dim)")


@hidden_test("ex-10-gqa", "large scores stay finite")
def gqa_large_scores(student, reference):
    q, k, v = randn(1, 4, 6, 8, seed=54, scale=30.0), randn(1, 2, 6, 8, seed=55, scale=30.0), randn(1, 2, 6, 8, seed=56)
    got = student.call("grouped_attention", q, k, v)
    if not isinstance(got, torch.Tensor) or not torch.isfinite(got).all():
        raise Hint("scores in the hundreds gave inf or nan: use torch.softmax (it subtracts the maximum)")
    if not torch.allclose(got, _grouped(q, k, v), atol=1e-4):
        raise Hint("with large scores the context differs from causal grouped attention")


# "write the grouping yourself" (no enable_gqa) is the exercise's rule on operations (checks/rules.py):
# the grader judges it on the operations it replays in the own-work run (clean_room), never on the
# answer's text (a helper of the student's own called repeat_kv is fine); the package's repeat_kv is
# not there to be used.
