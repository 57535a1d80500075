"""Self-checks for chapter 10 (attention at scale).

* :func:`flops` - ``ex-10-flops``: the FLOPs of one multi-head attention forward pass.
* :func:`kv_step` - ``ex-10-kv-step``: one decoding step with a KV cache.
* :func:`chunk_mask` - ``ex-10-chunk-mask``: the lower-right causal mask of new tokens that
  attend to cached ones (checked on many sizes and by chunked decoding).
* :func:`rope` - ``ex-10-rope``: rotary position embeddings (pairs of neighbours turned by
  position times frequency; scores that depend on the offset only).
* :func:`gqa` - ``ex-10-gqa``: causal grouped-query attention (query head ``h`` reads key/value
  head ``h // groups``).
"""

from __future__ import annotations

import math
import numbers

import torch

from .core import Guard, Hint, check_operations, close, register

__all__ = ["flops", "kv_step", "chunk_mask", "rope", "gqa"]


# ---------------------------------------------------------------- ex-10-flops
def _projections(B, T, d):
    return 4 * 2 * B * T * d * d


def _core(B, T, d):
    return 2 * 2 * B * T * T * d


def _reference_flops(B, T, d, H):
    return _projections(B, T, d) + _core(B, T, d)


# the chapter's GPT-2 sizes, small odd sizes, one token, a wide model
_FLOP_CASES = [(1, 6, 4, 2), (2, 10, 12, 3), (8, 1024, 768, 12), (3, 7, 5, 1),
               (1, 1, 8, 2), (5, 2, 1536, 24)]


def _flops_diagnosis(answer, B, T, d, H) -> str:
    """A hint when ``answer`` equals a typical wrong count, else an empty string."""
    proj, core = _projections(B, T, d), _core(B, T, d)
    causal_core = 2 * 2 * B * (T * (T + 1) // 2) * d
    wrong = [
        ((proj + core) / 2, "your count is half the expected one: you counted multiply-adds. "
         "A multiply-add is 2 FLOPs, so an (m, n) @ (n, p) product costs 2 * m * n * p"),
        (proj + H * core, "the attention core is counted once per head with all d columns: each "
         "of the H heads has only d / H columns, so together the heads cost as much as one head "
         "of d columns (2 * B * T^2 * d per product), whatever H is"),
        (proj + core / H, "the attention core is counted for one head of d / H columns only: "
         "there are H such heads, together 2 * B * T^2 * d per product"),
        (core, "only the attention core is counted: add the four projections W_query, W_key, "
         "W_value and out_proj, each 2 * B * T * d * d"),
        (proj, "only the projections are counted: add Q K^T and weights @ V, each "
         "2 * B * T^2 * d"),
        (proj + core / 2, "only one of the two T x T products is counted: the scores Q K^T and "
         "the context weights @ V each cost 2 * B * T^2 * d"),
        (3 * proj / 4 + core, "three projections are counted: out_proj (d x d) is the fourth"),
        (proj + 4 * B * T * d * d, "the T x T products are counted like the projections "
         "(T * d * d): the scores (T, d/H) @ (d/H, T) of a head cost 2 * T * T * d/H, so both "
         "products together grow like T^2: 4 * B * T^2 * d"),
        (proj + causal_core, "you counted only the causal half of the T x T pairs: the exercise "
         "asks for all T * T pairs (MultiHeadAttention computes every score before masking)"),
    ]
    for value, hint in wrong:
        if math.isclose(float(answer), float(value), rel_tol=1e-9):
            return hint
    return ""


@register("ex-10-flops", "Count the FLOPs")
def flops(attention_flops):
    """Check ``attention_flops(batch_size, num_tokens, d_model, num_heads) -> int``."""

    def number(B, T, d, H):
        answer = attention_flops(B, T, d, H)
        if isinstance(answer, torch.Tensor) and answer.numel() == 1:
            answer = answer.item()
        if not isinstance(answer, numbers.Real) or isinstance(answer, bool):
            raise Hint(f"attention_flops should return a number, got {type(answer).__name__}; "
                       "did you forget `return`?")
        return answer

    def case(B, T, d, H):
        def test():
            answer = number(B, T, d, H)
            expected = _reference_flops(B, T, d, H)
            if math.isclose(float(answer), expected, rel_tol=1e-9):
                return
            hint = _flops_diagnosis(answer, B, T, d, H)
            raise Hint(hint or f"for B={B}, T={T}, d={d}, H={H} expected {expected:,} FLOPs, "
                       f"got {answer:,}; count the four projections (2 * B * T * d * d each) "
                       "and the two T x T products (2 * B * T^2 * d each), as a formula in "
                       "B, T and d (not numbers that fit one example)")
        return test

    def heads_do_not_matter():
        counts = {H: number(2, 16, 24, H) for H in (1, 2, 3, 4, 6, 12)}
        if len(set(counts.values())) != 1:
            raise Hint("your count changes with the number of heads; splitting d columns into H "
                       "heads of d / H columns does not change the number of multiply-adds")

    tests = [(f"B={B}, T={T}, d={d}, H={H}", case(B, T, d, H)) for B, T, d, H in _FLOP_CASES]
    # a constant (a non-attempt) does not depend on H either: a guard
    return tests + [Guard("the count does not depend on the number of heads",
                          heads_do_not_matter)]


# ---------------------------------------------------------------- ex-10-kv-step
def _reference_step(query, new_key, new_value, cache_keys, cache_values):
    keys = torch.cat([cache_keys, new_key], dim=-2)
    values = torch.cat([cache_values, new_value], dim=-2)
    weights = torch.softmax(query @ keys.transpose(-2, -1) / math.sqrt(query.shape[-1]), dim=-1)
    return weights @ values, keys, values


def _tensors(*shape, seed):
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=generator)


def _unpack(out):
    if not isinstance(out, (tuple, list)) or len(out) != 3:
        length = f" of length {len(out)}" if isinstance(out, (tuple, list)) else ""
        raise Hint(f"decode_step should return three tensors (context, keys, values), got "
                   f"{type(out).__name__}{length}")
    if not all(isinstance(t, torch.Tensor) for t in out):
        raise Hint("decode_step should return three tensors (context, keys, values)")
    return [t.detach().float() for t in out]


@register("ex-10-kv-step", "One decoding step with a KV cache")
def kv_step(decode_step):
    """Check ``decode_step(query, new_key, new_value, cache_keys, cache_values)``."""
    B, H, t, hd = 2, 3, 5, 4
    query, new_key, new_value = (_tensors(B, H, 1, hd, seed=s) for s in (1, 2, 3))
    cache_keys, cache_values = _tensors(B, H, t, hd, seed=4), _tensors(B, H, t, hd, seed=5)
    inputs = (query, new_key, new_value, cache_keys, cache_values)
    originals = [tensor.clone() for tensor in inputs]
    try:
        context, keys, values = _unpack(decode_step(*[tensor.clone() for tensor in inputs]))
    except RuntimeError as err:
        if "must match" in str(err) or "size" in str(err):
            raise Hint(f"your code failed on a cache of shape (B, H, t, hd) = {(B, H, t, hd)} and "
                       f"a new token of shape {(B, H, 1, hd)} ({str(err).splitlines()[0]}); "
                       "append along the token dimension, "
                       "torch.cat([cache_keys, new_key], dim=-2)") from None
        raise
    expected_context, expected_keys, expected_values = _reference_step(*originals)

    def cache_grows():
        for name, got in (("keys", keys), ("values", values)):
            if got.shape == (B, H, t, hd):
                raise Hint(f"the returned {name} still have {t} tokens: append the new token's "
                           f"{name[:-1]} to the cache, "
                           f"torch.cat([cache_{name}, new_{name[:-1]}], dim=-2)")
            if got.shape != (B, H, t + 1, hd):
                raise Hint(f"expected the returned {name} to have shape (B, H, t + 1, hd) = "
                           f"{(B, H, t + 1, hd)}, got {tuple(got.shape)}; concatenate along the "
                           "token dimension, dim=-2 (dim=1 is the heads, dim=-1 the features)")

    def cache_order():
        cache_grows()
        if close(keys, expected_values) and close(values, expected_keys):
            raise Hint("keys and values are swapped: return (context, keys, values)")
        if close(keys[..., :1, :], new_key) and close(keys[..., 1:, :], cache_keys):
            raise Hint("the new key is at the front: append it at the end, "
                       "torch.cat([cache_keys, new_key], dim=-2), so positions stay in order")
        if not (close(keys, expected_keys) and close(values, expected_values)):
            raise Hint("the returned keys/values should be the old cache followed by the new "
                       "token's key/value")

    def context_shape():
        if context.shape != (B, H, 1, hd):
            raise Hint(f"the context of one new token should have shape (B, H, 1, hd) = "
                       f"{(B, H, 1, hd)}, got {tuple(context.shape)}")

    def context_values():
        context_shape()
        if close(context, expected_context, atol=1e-5):
            return
        only_cache = torch.softmax(query @ cache_keys.transpose(-2, -1) / math.sqrt(hd),
                                   -1) @ cache_values
        wrong = [
            (only_cache, "the new token does not attend to itself: attend over the cache AND "
             "the new key/value (concatenate first, then attend)"),
            (torch.softmax(query @ expected_keys.transpose(-2, -1), -1) @ expected_values,
             "the scores are not scaled: divide them by sqrt(head_dim) before the softmax"),
            (new_value.expand_as(context), "the new token attends only to itself; it must see "
             "every cached token too. If you used F.scaled_dot_product_attention(..., "
             "is_causal=True): with one query and t + 1 keys its mask is aligned top-left and "
             "hides almost everything, so call it without is_causal"),
            (cache_values[..., :1, :], "the query sees only the first key: "
             "F.scaled_dot_product_attention(..., is_causal=True) aligns its mask top-left, "
             "which is wrong for one query and t + 1 keys; drop is_causal (the new token may "
             "see all earlier tokens)"),
            (torch.softmax(query @ expected_keys.transpose(-2, -1) / math.sqrt(hd), -2)
             @ expected_values,
             "the softmax runs over the wrong dimension: normalise over the keys, dim=-1"),
        ]
        for candidate, hint in wrong:
            if close(context, candidate, atol=1e-5):
                raise Hint(hint)
        raise Hint("the context differs from softmax(q k^T / sqrt(hd)) @ v over all t + 1 "
                   "tokens")

    def empty_cache():
        empty = torch.zeros(B, H, 0, hd)
        got_context, got_keys, _ = _unpack(decode_step(query.clone(), new_key.clone(),
                                                       new_value.clone(), empty, empty))
        if got_keys.shape != (B, H, 1, hd) or not close(got_context, new_value, atol=1e-5):
            raise Hint("with an empty cache (t = 0) the first token attends only to itself, so "
                       "its context equals its value; make the code work for cache tensors of "
                       "shape (B, H, 0, hd)")

    def matches_full_attention():
        T = 6
        queries, all_keys, all_values = (_tensors(1, 2, T, hd, seed=s) for s in (6, 7, 8))
        hide = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
        scores = (queries @ all_keys.transpose(-2, -1)).masked_fill(hide, float("-inf"))
        full = torch.softmax(scores / math.sqrt(hd), dim=-1) @ all_values
        cached_k = cached_v = torch.zeros(1, 2, 0, hd)
        for position in range(T):
            step = slice(position, position + 1)
            ctx, cached_k, cached_v = _unpack(decode_step(
                queries[..., step, :].clone(), all_keys[..., step, :].clone(),
                all_values[..., step, :].clone(), cached_k, cached_v))
            if not close(ctx, full[..., step, :], atol=1e-5):
                raise Hint(f"decoding token by token differs from full causal attention at "
                           f"position {position}: pass the returned keys and values back in as "
                           "the next cache")

    def inputs_untouched():
        decode_step(*inputs)
        if not all(torch.equal(a, b) for a, b in zip(inputs, originals)):
            raise Hint("your function changed its input tensors in place (e.g. query /= ... or "
                       "cache_keys.copy_); compute new tensors instead")

    return [
        ("the context attends over all t + 1 tokens", context_values),  # the main value test first
        ("the cache grows by one token", cache_grows),
        ("old tokens first, then the new one", cache_order),
        Guard("the context has shape (B, H, 1, hd)", context_shape),
        ("works with an empty cache", empty_cache),
        ("token by token equals full causal attention", matches_full_attention),
        Guard("leaves the inputs unchanged", inputs_untouched),
    ]


# ---------------------------------------------------------------- ex-10-chunk-mask
def _reference_chunk_mask(num_new: int, num_cached: int) -> torch.Tensor:
    ones = torch.ones(num_new, num_cached + num_new, dtype=torch.bool)
    return torch.triu(ones, diagonal=num_cached + 1)


_CHUNK_CASES = [(3, 4), (4, 0), (2, 1), (5, 7)]  # num_new = 1: a guard below


def _chunk_diagnosis(got: torch.Tensor, num_new: int, num_cached: int) -> str:
    ones = torch.ones(num_new, num_cached + num_new, dtype=torch.bool)
    expected = _reference_chunk_mask(num_new, num_cached)
    wrong = [
        (~expected, "True must mean hidden (the book's convention): your mask is True where a "
         "query may attend; return its negation"),
        (torch.triu(ones, diagonal=1), "your mask is aligned to the upper left (query i sees "
         "keys 0..i, what is_causal=True does): new token i sits at position num_cached + i, "
         "so it sees keys 0..num_cached + i"),
        (torch.triu(ones, diagonal=num_cached), "a new token does not see itself: the diagonal "
         "is off by one (hide key j only when j > num_cached + i)"),
        (torch.triu(ones, diagonal=num_cached + 2), "a new token sees the token after it: the "
         "diagonal is off by one the other way (hide key j when j > num_cached + i)"),
        (torch.zeros_like(ones), "nothing is hidden: a new token must not see the new tokens "
         "after it"),
    ]
    for candidate, hint in wrong:
        if torch.equal(got, candidate):
            return hint
    return ""


def _as_mask(answer, num_new: int, num_cached: int) -> torch.Tensor:
    if not isinstance(answer, torch.Tensor):
        raise Hint(f"chunk_mask should return a torch.Tensor, got {type(answer).__name__}")
    shape = (num_new, num_cached + num_new)
    if answer.shape == (num_new, num_new) and num_cached:
        raise Hint(f"the mask has shape {tuple(answer.shape)}: it must also cover the "
                   f"{num_cached} cached keys, shape (num_new, num_cached + num_new) = {shape}")
    if answer.shape == shape[::-1] and shape[0] != shape[1]:
        raise Hint(f"the mask is transposed: rows are the new queries, columns all keys, shape "
                   f"(num_new, num_cached + num_new) = {shape}")
    if answer.shape != shape:
        raise Hint(f"expected shape (num_new, num_cached + num_new) = {shape}, got "
                   f"{tuple(answer.shape)}")
    if answer.dtype != torch.bool:
        raise Hint(f"return a bool tensor (True = hidden), got dtype {answer.dtype}; "
                   "e.g. build it from torch.ones(..., dtype=torch.bool)")
    return answer.cpu()


@register("ex-10-chunk-mask", "A causal mask for new tokens")
def chunk_mask(chunk_mask):
    """Check ``chunk_mask(num_new, num_cached) -> (num_new, num_cached + num_new)`` bool."""

    def shape():
        _as_mask(chunk_mask(3, 4), 3, 4)

    def case(num_new, num_cached):
        def test():
            got = _as_mask(chunk_mask(num_new, num_cached), num_new, num_cached)
            if torch.equal(got, _reference_chunk_mask(num_new, num_cached)):
                return
            hint = _chunk_diagnosis(got, num_new, num_cached)
            raise Hint(hint or f"for num_new={num_new}, num_cached={num_cached} the mask should "
                       f"hide key j from new token i exactly when j > num_cached + i; got\n"
                       f"{got.int()}")
        return test

    def no_cache_is_causal():
        got = _as_mask(chunk_mask(5, 0), 5, 0)
        causal = torch.triu(torch.ones(5, 5, dtype=torch.bool), diagonal=1)
        if not torch.equal(got, causal):
            raise Hint("with an empty cache (num_cached=0) the mask must be chapter 7's causal "
                       "mask, torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)")

    def one_new_token_sees_everything():
        got = _as_mask(chunk_mask(1, 6), 1, 6)
        if got.any():
            raise Hint("one new token comes after every cached token, so it may see all of "
                       "them and itself: its row hides nothing")

    def chunked_decoding():
        T, hd = 9, 4
        generator = torch.Generator().manual_seed(11)
        q, k, v = (torch.randn(1, 2, T, hd, generator=generator) for _ in range(3))
        hide = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
        scores = (q @ k.transpose(-2, -1) / math.sqrt(hd)).masked_fill(hide, float("-inf"))
        full = torch.softmax(scores, dim=-1) @ v
        start = 0
        for size in (3, 1, 2, 3):
            end = start + size
            mask = _as_mask(chunk_mask(size, start), size, start)
            part = (q[..., start:end, :] @ k[..., :end, :].transpose(-2, -1)) / math.sqrt(hd)
            out = torch.softmax(part.masked_fill(mask, float("-inf")), dim=-1) @ v[..., :end, :]
            if not close(out, full[..., start:end, :], atol=1e-5):
                raise Hint(f"decoding in chunks of 3, 1, 2, 3 tokens with your mask differs "
                           f"from one causal pass over all {T} tokens in the chunk of tokens "
                           f"{start}..{end - 1}: each new token must see the cached tokens, "
                           "itself and the new tokens before it")
            start = end

    tests = [Guard("a (num_new, num_cached + num_new) bool mask", shape)]
    tests += [(f"num_new={n}, num_cached={c}", case(n, c)) for n, c in _CHUNK_CASES]
    return tests + [
        ("an empty cache gives the causal mask", no_cache_is_causal),
        # an all-False mask (a non-attempt) also hides nothing here: a guard
        Guard("one new token sees everything", one_new_token_sees_everything),
        ("chunked decoding equals one causal pass", chunked_decoding),
    ]


# ---------------------------------------------------------------- ex-10-rope
def _reference_rotate(x: torch.Tensor, positions: torch.Tensor, base: float = 10_000.0):
    head_dim = x.shape[-1]
    theta = base ** (-torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
    angles = positions.to(torch.float64)[:, None] * theta  # (T, hd/2)
    a, b = x.double()[..., 0::2], x.double()[..., 1::2]
    out = torch.empty_like(x, dtype=torch.float64)
    out[..., 0::2] = a * torch.cos(angles) - b * torch.sin(angles)
    out[..., 1::2] = a * torch.sin(angles) + b * torch.cos(angles)
    return out.to(x.dtype)


def _rope_diagnosis(got, x, positions) -> str:
    """A hint when ``got`` equals a typical wrong rotation of ``x``, else an empty string."""
    head_dim = x.shape[-1]
    half = head_dim // 2
    pair_index = torch.arange(half, dtype=torch.float64)
    theta = 10_000.0 ** (-2 * pair_index / head_dim)
    steps = positions.double()[:, None]  # (T, 1)
    a, b = x.double()[..., 0::2], x.double()[..., 1::2]
    lo, hi = x.double()[..., :half], x.double()[..., half:]

    def turned(angles, first=a, second=b, sign=1.0):
        """Pairs (first, second) turned by ``angles`` (sign -1: clockwise), as neighbours."""
        cos, sin = torch.cos(angles), sign * torch.sin(angles)
        return torch.stack((first * cos - second * sin, first * sin + second * cos),
                           dim=-1).flatten(-2)

    cos, sin = torch.cos(steps * theta), torch.sin(steps * theta)
    wrong = [
        (torch.cat((lo * cos - hi * sin, lo * sin + hi * cos), dim=-1),
         "you paired number i with number i + head_dim / 2 (the 'rotate half' layout of some "
         "libraries); this exercise pairs neighbours: numbers 0 and 1, 2 and 3, ..."),
        (turned(steps * theta, sign=-1.0),
         "your pairs turn the wrong way (clockwise): a positive angle turns (1, 0) towards "
         "(0, 1), as in the exercise's formula"),
        (torch.stack((a * sin - b * cos, a * cos + b * sin), dim=-1).flatten(-2),
         "cos and sin are swapped: the first number of a pair keeps cos of the angle"),
        (turned(steps * 10_000.0 ** (-pair_index / head_dim)),
         "the angles per pair fall too slowly: with i counting pairs (0 .. head_dim / 2 - 1), "
         "pair i turns by base ** (-2 * i / head_dim) per position"),
        (turned(steps / theta),
         "your angles grow with the pair index: theta_i = base ** (-2 * i / head_dim) gets "
         "smaller for later pairs (a minus sign in the exponent)"),
        (turned(theta.expand(len(positions), -1)),
         "every token is turned by the same angles, whatever its position: multiply the "
         "angles by each token's position"),
    ]
    ordinary = torch.arange(x.shape[-2])
    if not torch.equal(ordinary, positions):
        wrong.append((_reference_rotate(x.double(), ordinary),
                      "your code ignores the positions argument and uses 0 .. T - 1: turn each "
                      "token by the position it is given (after a KV cache they continue)"))
    for candidate, hint in wrong:
        if close(got, candidate, atol=1e-4):
            return hint
    return ""


@register("ex-10-rope", "Rotate queries and keys (RoPE)")
def rope(rotate):
    """Check ``rotate(x, positions) -> x rotated``: ``x`` ``(..., T, head_dim)``, ``positions``
    ``(T,)``, pair ``(2i, 2i + 1)`` turned by ``positions * 10000 ** (-2 i / head_dim)``."""
    generator = torch.Generator().manual_seed(21)
    x = torch.randn(2, 3, 5, 8, generator=generator)  # (B, H, T, hd)
    positions = torch.tensor([3, 4, 5, 6, 7])  # a chunk after a cache of 3 tokens
    original = x.clone()

    def result(x_in, positions_in):
        out = rotate(x_in.clone(), positions_in.clone())
        if not isinstance(out, torch.Tensor):
            raise Hint(f"rotate should return a tensor, got {type(out).__name__}; did you forget "
                       "`return`?")
        return out

    def shape_and_dtype():
        out = result(x, positions)
        if out.shape != x.shape:
            raise Hint(f"the result must have the shape of x, {tuple(x.shape)}, got "
                       f"{tuple(out.shape)}: rotate the pairs in place of the numbers, do not "
                       "stack them into a new dimension (flatten it back)")
        if out.dtype != x.dtype:
            raise Hint(f"the result must keep x's dtype ({x.dtype}), got {out.dtype}")

    def values():
        shape_and_dtype()
        got = result(x, positions)
        if close(got, _reference_rotate(x, positions), atol=1e-5):
            return
        raise Hint(_rope_diagnosis(got, x, positions)
                   or "the rotated numbers differ from turning pair (2i, 2i + 1) by the angle "
                      "position * 10000 ** (-2 * i / head_dim)")

    def lengths_kept():
        out = result(x, positions)
        if not close(out.norm(dim=-1), x.norm(dim=-1), atol=1e-4):
            raise Hint("the vectors changed length: a rotation only turns them (check that both "
                       "numbers of a pair use the same angle, with cos and sin)")

    def offsets_only():
        q, k = torch.randn(2, 1, 16, generator=torch.Generator().manual_seed(22))
        scores = []
        for m, n in ((4, 1), (40, 37), (400, 397)):
            rotated_q = result(q, torch.tensor([m]))
            rotated_k = result(k, torch.tensor([n]))
            scores.append(float((rotated_q * rotated_k).sum()))
        if max(scores) - min(scores) > 1e-3 * (1 + abs(scores[0])):
            raise Hint(f"a query 3 positions after its key scores {scores[0]:.4f} at positions 4 "
                       f"and 1 but {scores[1]:.4f} at 40 and 37: with RoPE the score may depend "
                       "only on the offset (turn queries and keys by the same rule)")

    def one_head():
        head = torch.randn(3, 4, generator=torch.Generator().manual_seed(23))  # (T, hd)
        got = result(head, torch.arange(3))
        if not close(got, _reference_rotate(head, torch.arange(3)), atol=1e-5):
            raise Hint(_rope_diagnosis(got, head, torch.arange(3))
                       or "for a (T, head_dim) = (3, 4) input at positions 0, 1, 2 the rotated "
                          "numbers are wrong: turn pair (2i, 2i + 1) by position * 10000 ** "
                          "(-2 * i / head_dim)")

    def position_zero():
        out = result(x[..., :1, :], torch.tensor([0]))
        if not close(out, x[..., :1, :]):
            raise Hint("position 0 must not rotate anything (angle 0)")

    def float64():
        out = result(x.double(), positions)
        if out.dtype != torch.float64:
            raise Hint(f"a float64 x must give a float64 result, got {out.dtype}")

    def untouched():
        rotate(x, positions)
        if not torch.equal(x, original):
            raise Hint("your function changed x in place (e.g. x[..., 0::2] = ...): build a new "
                       "tensor and leave the input as it was")

    # a non-attempt (x returned as it is) keeps shape, dtype, lengths and offsets: guards
    return [
        Guard("same shape and dtype as x", shape_and_dtype),
        ("pairs of neighbours turned by position times frequency", values),
        ("one head of 4 numbers at positions 0, 1, 2", one_head),
        Guard("scores depend only on the offset", offsets_only),
        Guard("float64 stays float64", float64),
        Guard("lengths unchanged", lengths_kept),
        Guard("position 0 is no rotation", position_zero),
        Guard("leaves x unchanged", untouched),
    ]


# ---------------------------------------------------------------- ex-10-gqa
def _attend(queries, keys, values, scale=True, mask=True, dim=-1):
    """Causal ``softmax(queries @ keys^T / sqrt(hd)) @ values``, head by head (or a typical slip:
    no scale, no mask, the softmax over another dimension)."""
    T = queries.shape[-2]
    scores = queries @ keys.transpose(-2, -1)
    if scale:
        scores = scores / math.sqrt(queries.shape[-1])
    if mask:
        scores = scores.masked_fill(torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1), float("-inf"))
    return torch.softmax(scores, dim=dim) @ values


def _reference_gqa(queries, keys, values):
    groups = queries.shape[1] // keys.shape[1]
    return _attend(queries, keys.repeat_interleave(groups, dim=1), values.repeat_interleave(groups, dim=1))


def _gqa_diagnosis(got, queries, keys, values) -> str:
    H = queries.shape[1]
    groups = H // keys.shape[1]
    tiled = (keys.repeat(1, groups, 1, 1), values.repeat(1, groups, 1, 1))
    grouped = (keys.repeat_interleave(groups, 1), values.repeat_interleave(groups, 1))
    wrong = [
        (_attend(queries, *tiled), "query head h reads key/value head h % num_kv_heads: you tiled the "
         "heads (like tensor.repeat). Consecutive query heads form a group: head h reads "
         "key/value head h // (num_heads // num_kv_heads)"),
        (_attend(queries, *grouped, mask=False), "a query sees later tokens: hide every key that comes "
         "after its query (causal attention)"),
        (_attend(queries, *grouped, scale=False), "the scores are not scaled: divide them by "
         "sqrt(head_dim) before the softmax"),
        (_attend(queries, keys[:, :1].expand(-1, H, -1, -1), values[:, :1].expand(-1, H, -1, -1)),
         "every query head reads key/value head 0: each group of query heads has its own "
         "key/value head"),
        (_attend(queries, *grouped, dim=-2), "the softmax runs over the queries: normalise over the "
         "keys, dim=-1"),
    ]
    for candidate, hint in wrong:
        if close(got, candidate, atol=1e-5):
            return hint
    return ""


@register("ex-10-gqa", "Grouped-query attention")
def gqa(grouped_attention):
    """Check ``grouped_attention(queries, keys, values)``: causal attention in which query head
    ``h`` of ``(B, H, T, hd)`` reads key/value head ``h // (H // H_kv)`` of ``(B, H_kv, T, hd)``."""
    def tensors(B, H, H_kv, T, hd, seed):
        generator = torch.Generator().manual_seed(seed)
        return (torch.randn(B, H, T, hd, generator=generator),
                torch.randn(B, H_kv, T, hd, generator=generator),
                torch.randn(B, H_kv, T, hd, generator=generator))

    queries, keys, values = tensors(2, 6, 2, 5, 4, seed=31)  # groups of 3
    originals = [t.clone() for t in (queries, keys, values)]

    def run(q, k, v):
        try:
            out = grouped_attention(q.clone(), k.clone(), v.clone())
        except NotImplementedError:  # a RuntimeError too: not a crash but a non-attempt
            raise
        except RuntimeError as err:
            raise Hint(f"your code failed for queries {tuple(q.shape)} and keys/values "
                       f"{tuple(k.shape)} ({str(err).splitlines()[0]}): repeat each key/value "
                       "head for its group of query heads before the products") from None
        if not isinstance(out, torch.Tensor):
            raise Hint(f"grouped_attention should return a tensor, got {type(out).__name__}")
        return out

    def shape():
        out = run(queries, keys, values)
        if out.shape != queries.shape:
            raise Hint(f"the result must have the queries' shape (B, H, T, hd) = "
                       f"{tuple(queries.shape)}, one context vector per query head, got "
                       f"{tuple(out.shape)}")

    def case(q, k, v, what):
        def test():
            out = run(q, k, v)
            if close(out, _reference_gqa(q, k, v)):
                return
            raise Hint(_gqa_diagnosis(out, q, k, v)
                       or f"{what}: the context differs from causal softmax(q k^T / sqrt(hd)) "
                          "@ v in which query head h reads key/value head h // groups")
        return test

    def causal():
        out = run(queries, keys, values)
        changed_k, changed_v = keys.clone(), values.clone()
        changed_k[..., -1, :] += 5.0
        changed_v[..., -1, :] -= 5.0
        later = run(queries, changed_k, changed_v)
        if not close(out[..., :-1, :], later[..., :-1, :]):
            raise Hint("changing the last token's key and value changed earlier outputs: hide "
                       "keys that come after their query")

    def own_grouping():
        # what the kernel is given, recorded (the grader decides the same way): a kernel that
        # gets fewer key/value heads than query heads does the grouping (enable_gqa=True)
        check_operations("ex-10-gqa", grouped_attention, queries.clone(), keys.clone(), values.clone())

    def untouched():
        run(queries, keys, values)
        grouped_attention(queries, keys, values)
        if not all(torch.equal(a, b) for a, b in zip((queries, keys, values), originals)):
            raise Hint("your function changed its inputs in place: compute new tensors")

    return [
        Guard("one context vector per query head", shape),
        ("groups of 3 query heads share a key/value head",
         case(queries, keys, values, "6 query heads, 2 key/value heads")),
        ("one key/value head per query head is multi-head attention",
         case(*tensors(1, 4, 4, 6, 8, seed=32), "4 query heads, 4 key/value heads")),
        ("one key/value head for all is multi-query attention",
         case(*tensors(3, 4, 1, 3, 2, seed=33), "4 query heads, 1 key/value head")),
        Guard("causal: later tokens change nothing earlier", causal),
        Guard("the grouping is written by you", own_grouping),
        Guard("leaves the inputs unchanged", untouched),
    ]
