"""Self-checks for chapter 10 (attention at scale).

* :func:`flops` - ``ex-10-flops``: the FLOPs per token of a forward pass of chapter 9's GPT,
  against PyTorch's FLOP counter.
* :func:`kv_step` - ``ex-10-kv-step``: one decoding step with a KV cache.
* :func:`chunk_mask` - ``ex-10-chunk-mask``: find the bug: new tokens after a cache, their
  lower-right mask handed to SDPA in the book's convention (checked on many sizes and by chunked
  decoding).
* :func:`cached_generation` - ``ex-10-cached-generation``: greedy generation for chapter 9's GPT
  with a KV cache written by the learner around the model's parts: the same tokens as
  generating without a cache, each step projecting only the new token.
* :func:`sdpa` - ``ex-10-sdpa``: the core replaced by ``F.scaled_dot_product_attention``
  (masks inverted and combined, padding broadcast, scale, dropout in training only).
* :func:`rope` - ``ex-10-rope``: rotary position embeddings (pairs of neighbours turned by
  position times frequency; scores that depend on the offset only).
* :func:`gqa` - ``ex-10-gqa``: causal grouped-query attention (query head ``h`` reads key/value
  head ``h // groups``).
"""

from __future__ import annotations

import math
import numbers

import torch

from .core import VALUES_FIRST, Guard, Hint, check_operations, close, register

__all__ = ["flops", "kv_step", "chunk_mask", "rope", "gqa", "sdpa", "cached_generation"]


# ---------------------------------------------------------------- ex-10-flops
# The FLOPs per token of a whole forward pass of chapter 9's GPT, counted by the learner as a
# formula and measured here with PyTorch's FLOP counter (torch.utils.flop_counter) on a real
# GPT: matrix products only (2 FLOPs per multiply-add), every one of the T x T score pairs.


def gpt_flops_reference(n_layer, d_model, vocab_size, num_tokens):
    """Per token: each block 24 d^2 (q, k, v, out_proj: 8 d^2; MLP: 16 d^2) + 4 T d (scores and
    context over all T keys), then the output layer 2 d V."""
    d, T = d_model, num_tokens
    return n_layer * (24 * d * d + 4 * T * d) + 2 * d * vocab_size


def measured_gpt_flops(n_layer, d_model, n_head, vocab_size, num_tokens, batch_size=2):
    """FLOPs per token of one forward pass of ``attention_book.gpt.GPT``, counted by PyTorch."""
    from torch.utils.flop_counter import FlopCounterMode

    from ..gpt import GPT, GPTConfig

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = GPT(GPTConfig(vocab_size=vocab_size, context_length=max(num_tokens, 2), d_model=d_model,
                              n_layer=n_layer, n_head=n_head,
                              # the book's core: every T x T product, all counted (the counter
                              # does not know PyTorch's CPU flash kernel)
                              fused_attention=False)).eval()
        ids = torch.randint(0, vocab_size, (batch_size, num_tokens))
    with FlopCounterMode(display=False) as counter, torch.no_grad():
        model(ids)
    return counter.get_total_flops() / (batch_size * num_tokens)


def _flops_diagnosis(answer, L, d, H, V, T) -> str:
    """A hint when ``answer`` equals a typical wrong count, else an empty string."""
    blocks, core, head = L * 24 * d * d, L * 4 * T * d, 2 * d * V
    wrong = [
        ((blocks + core + head) / 2, "your count is half the measured one: you counted multiply-adds. "
         "A multiply-add is 2 FLOPs, so an (m, n) @ (n, p) product costs 2 * m * n * p"),
        ((blocks + core + head) * T, "that is the count of a whole sequence: divide by the T tokens "
         "(the question is per token)"),
        (blocks + head, "the attention core is missing: the scores and the weighted sum each cost "
         "2 * T * d per token and layer (a query against all T keys), 4 * T * d together"),
        (blocks + core, "the output layer is missing: lm_head turns each token's d numbers into V "
         "scores, 2 * d * V FLOPs (its weight is tied to the embedding, but it still computes)"),
        (blocks + core + head + 2 * d * V, "the token embedding is a lookup, not a product: count "
         "only lm_head's 2 * d * V"),
        (L * 12 * d * d + core + head, "the MLP is d -> 4d -> d: two products of 2 * d * 4d each, "
         "16 * d^2 per token, besides the 8 * d^2 of the four attention projections"),
        (L * 18 * d * d + core + head, "the MLP's hidden layer is 4d wide: 16 * d^2 per token, not 10"),
        (L * 22 * d * d + core + head, "four projections in attention: W_query, W_key, W_value and "
         "out_proj, 2 * d * d each"),
        (blocks + L * 2 * (T + 1) * d + head, "you counted the causal half of the score pairs: "
         "the model computes all T x T scores before it masks them, 4 * T * d per token and layer"),
        (blocks + core * H + head, "the attention core is counted once per head with all d columns: "
         "H heads of d / H columns cost what one head of d columns costs"),
        (blocks + core / H + head, "the attention core is counted for one head only: H heads of "
         "d / H columns together cost 4 * T * d per token and layer"),
    ]
    for value, hint in wrong:
        if math.isclose(float(answer), float(value), rel_tol=1e-9):
            return hint
    return ""


#: (n_layer, d_model, n_head, vocab_size, num_tokens): small GPTs the counter measures
_FLOP_CASES = [(2, 32, 4, 50, 16), (3, 48, 6, 100, 8), (1, 16, 2, 30, 1), (2, 24, 3, 64, 20)]


@register("ex-10-flops", "FLOPs per token of a GPT")
def flops(gpt_flops_per_token):
    """Check ``gpt_flops_per_token(n_layer, d_model, n_head, vocab_size, num_tokens)`` against
    PyTorch's FLOP counter on chapter 9's GPT."""

    def number(*sizes):
        answer = gpt_flops_per_token(*sizes)
        if isinstance(answer, torch.Tensor) and answer.numel() == 1:
            answer = answer.item()
        if not isinstance(answer, numbers.Real) or isinstance(answer, bool):
            raise Hint(f"gpt_flops_per_token should return a number, got {type(answer).__name__}; "
                       "did you forget `return`?")
        return answer

    def case(L, d, H, V, T):
        def test():
            answer = number(L, d, H, V, T)
            measured = measured_gpt_flops(L, d, H, V, T)
            if math.isclose(float(answer), measured, rel_tol=1e-9):
                return
            raise Hint(_flops_diagnosis(answer, L, d, H, V, T) or (
                f"for n_layer={L}, d_model={d}, n_head={H}, vocab_size={V}, num_tokens={T} PyTorch's "
                f"FLOP counter measures {measured:,.0f} FLOPs per token, you count {answer:,}: count "
                "every matrix product of a block (attention's projections and T x T products, the "
                "MLP) and the output layer, as a formula (not numbers that fit one case)"))
        return test

    def gpt2_small():
        answer = number(12, 768, 12, 50_257, 1024)
        if not math.isclose(float(answer), gpt_flops_reference(12, 768, 50_257, 1024), rel_tol=1e-9):
            raise Hint(_flops_diagnosis(answer, 12, 768, 12, 50_257, 1024) or (
                "right for the small GPTs but not for GPT-2 small's sizes: write the count as a formula "
                "in n_layer, d_model, vocab_size and num_tokens"))

    def heads_do_not_matter():
        counts = {H: number(2, 24, H, 40, 10) for H in (1, 2, 3, 4, 6, 12)}
        if len(set(counts.values())) != 1:
            raise Hint("your count changes with the number of heads; splitting d columns into H heads "
                       "of d / H columns does not change the number of multiply-adds")

    tests = [(f"n_layer={L}, d={d}, H={H}, V={V}, T={T} (measured)", case(L, d, H, V, T))
             for L, d, H, V, T in _FLOP_CASES]
    return tests + [("GPT-2 small at T = 1024", gpt2_small),
                    # a constant (a non-attempt) does not depend on H either: a guard
                    Guard("the count does not depend on the number of heads", heads_do_not_matter)]


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
# Find the bug: new tokens after a KV cache need the lower-right causal mask, and the given code
# builds it right, in the book's convention (True = hidden), then hands it to SDPA, whose
# boolean attn_mask is True where a key *takes part*: each new token attends only to the keys
# after it (and the last one to nothing). The fix inverts the mask (or uses causal_lower_right).


def chunk_reference(queries, keys, values):
    """Causal attention of the last ``n`` tokens (the queries) over all ``t + n`` keys: the core."""
    from ..functional import scaled_dot_product_attention

    num_new, total = queries.shape[-2], keys.shape[-2]
    hidden = torch.ones(num_new, total, dtype=torch.bool).triu(total - num_new + 1)
    return scaled_dot_product_attention(queries, keys, values, mask=hidden)[0]


def chunk_diagnosis(got, queries, keys, values) -> str:
    import torch.nn.functional as F

    num_new, total = queries.shape[-2], keys.shape[-2]
    ones = torch.ones(num_new, total, dtype=torch.bool)
    hidden = ones.triu(total - num_new + 1)
    if torch.isnan(got).any():
        return ("your output has NaN: a new token attends to no key at all; " + INVERTED
                + " (the given mask hides nothing from the last token, so SDPA sees no key to attend to)")
    candidates = [
        (dict(attn_mask=hidden), INVERTED),
        (dict(is_causal=True), "is_causal=True aligns the causal mask to the upper left (query i sees keys "
         "0..i): new token i sits at position t + i and sees keys 0..t + i, the lower-right mask; "
         "pass ~hidden (or torch.nn.attention.bias.causal_lower_right)"),
        (dict(), "nothing is hidden: a new token must not see the new tokens after it"),
        (dict(attn_mask=~ones.triu(total - num_new)), "a new token does not see itself: the diagonal is "
         "off by one (hide key j only when j > t + i)"),
        (dict(attn_mask=~ones.triu(total - num_new + 2)), "a new token sees the token after it: the diagonal "
         "is off by one (hide key j when j > t + i)"),
    ]
    for options, hint in candidates:
        with torch.no_grad():
            candidate = F.scaled_dot_product_attention(queries, keys, values, **options)
        if candidate.shape == got.shape and torch.allclose(got, candidate, atol=1e-5, equal_nan=True):
            if options.get("attn_mask") is hidden and num_new == 1:
                return INVERTED + " (for one new token the given mask hides nothing, so SDPA lets it see nothing)"
            return hint
    return ""


@register("ex-10-chunk-mask", "Find the bug: a mask that means the opposite")
def chunk_mask(attend_new_tokens):
    """Check the fixed ``attend_new_tokens(queries, keys, values)``: the newest ``n`` tokens'
    queries ``(B, H, n, hd)`` attend causally to all keys and values ``(B, H, t + n, hd)``."""

    def case(B, H, num_new, num_cached, hd, seed, what):
        generator = torch.Generator().manual_seed(seed)
        total = num_cached + num_new
        q = torch.randn(B, H, num_new, hd, generator=generator)
        k, v = (torch.randn(B, H, total, hd, generator=generator) for _ in range(2))
        got = attend_new_tokens(q.clone(), k.clone(), v.clone())
        if not isinstance(got, torch.Tensor):
            raise Hint(f"return the new tokens' outputs as a tensor, got {type(got).__name__}")
        want = chunk_reference(q, k, v)
        if got.shape != want.shape:
            raise Hint(f"{what}: expected an output of shape {tuple(want.shape)} (B, H, n, hd), got "
                       f"{tuple(got.shape)}")
        if not torch.allclose(got, want, atol=1e-5):
            raise Hint(f"{what}: " + (chunk_diagnosis(got, q, k, v) or (
                "the output differs from causal attention of the new tokens: token i of the chunk sits "
                "at position t + i and sees keys 0 .. t + i")))

    def chunked_decoding():
        T, hd = 9, 4
        generator = torch.Generator().manual_seed(11)
        q, k, v = (torch.randn(1, 2, T, hd, generator=generator) for _ in range(3))
        full = chunk_reference(q, k, v)  # no cache: one causal pass
        start = 0
        for size in (3, 1, 2, 3):
            end = start + size
            out = attend_new_tokens(q[..., start:end, :], k[..., :end, :], v[..., :end, :])
            if not isinstance(out, torch.Tensor) or not close(out, full[..., start:end, :], atol=1e-5):
                raise Hint(f"decoding in chunks of 3, 1, 2, 3 tokens differs from one causal pass over all "
                           f"{T} tokens in the chunk of tokens {start}..{end - 1}: each new token sees the "
                           "cached tokens, itself and the new tokens before it")
            start = end

    def unchanged():
        generator = torch.Generator().manual_seed(12)
        q = torch.randn(1, 2, 2, 4, generator=generator)
        k, v = (torch.randn(1, 2, 5, 4, generator=generator) for _ in range(2))
        copies = [t.clone() for t in (q, k, v)]
        attend_new_tokens(*copies)
        if not all(torch.equal(a, b) for a, b in zip(copies, (q, k, v))):
            raise Hint("your function changed its inputs in place; build new tensors instead")

    return [
        ("3 new tokens after 4 cached ones", lambda: case(2, 2, 3, 4, 8, 0, "3 new tokens, 4 cached")),
        ("one new token sees every key", lambda: case(2, 3, 1, 6, 4, 1, "one new token, 6 cached")),
        ("no cache: the ordinary causal mask", lambda: case(1, 2, 5, 0, 4, 2, "5 tokens, no cache")),
        ("a chunk longer than the cache", lambda: case(1, 1, 6, 2, 4, 3, "6 new tokens, 2 cached")),
        ("chunked decoding equals one causal pass", chunked_decoding),
        Guard("leaves the inputs unchanged", unchanged),
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


# ---------------------------------------------------------------- ex-10-sdpa
# The hand-written core replaced by F.scaled_dot_product_attention, compared with the package's
# core (attention_book.functional) on the same inputs: the book's masks (True = hidden) become
# SDPA's (True = takes part), padding broadcasts to (B, 1, 1, T_k), a causal mask and padding
# together need one combined mask, the scale passes through, dropout acts only in training,
# and a query with nothing to see gets zeros (the core's rule).

INVERTED = (
    "the mask means the opposite in SDPA: a boolean attn_mask is True where a key *takes part*, "
    "the book's masks are True where it is hidden; pass ~hidden"
)


def sdpa_reference(query, key, value, key_padding_mask=None, causal=False, scale=None):
    """The package's core with the book's mask: what ``fused_attention`` must return (no dropout)."""
    from ..functional import scaled_dot_product_attention

    T_q, T_k = query.shape[-2], key.shape[-2]
    hidden = None
    if causal:
        hidden = torch.ones(T_q, T_k, dtype=torch.bool).triu(1)
    if key_padding_mask is not None:
        padding = key_padding_mask[:, None, None, :]  # (B, 1, 1, T_k)
        hidden = padding if hidden is None else hidden | padding
    return scaled_dot_product_attention(query, key, value, mask=hidden, scale=scale)[0]


def _sdpa_candidates(query, key, value, key_padding_mask, causal, scale):
    """(output, hint) of the classic mistakes on these inputs."""
    import torch.nn.functional as F

    T_q, T_k = query.shape[-2], key.shape[-2]
    hidden = torch.zeros(T_q, T_k, dtype=torch.bool)
    if causal:
        hidden = hidden | torch.ones(T_q, T_k, dtype=torch.bool).triu(1)
    if key_padding_mask is not None:
        hidden = hidden | key_padding_mask[:, None, None, :]
    found = []

    def add(hint, **options):
        try:
            with torch.no_grad():
                found.append((F.scaled_dot_product_attention(query, key, value, **options), hint))
        except RuntimeError:
            pass

    add(INVERTED, attn_mask=hidden, scale=scale)
    if causal and key_padding_mask is not None:
        add("with padding *and* a causal mask you passed only the padding: combine both into one "
            "mask, hidden = causal | padding, and pass ~hidden (is_causal cannot be combined with "
            "attn_mask)", attn_mask=~key_padding_mask[:, None, None, :], scale=scale)
        add("with padding *and* a causal mask you passed only the causal part: combine both into one "
            "mask, hidden = causal | padding, and pass ~hidden", is_causal=True, scale=scale)
    if causal:
        add("the causal mask is missing: is_causal=True (or a mask that hides key j > query i)",
            attn_mask=None if key_padding_mask is None else ~key_padding_mask[:, None, None, :], scale=scale)
    if key_padding_mask is not None:
        add("the padding is not hidden: turn key_padding_mask (B, T_k) into an attn_mask of shape "
            "(B, 1, 1, T_k) and invert it", is_causal=causal, scale=scale)
    if scale is not None:
        add("the scale argument is ignored: pass scale=scale to SDPA (None means 1/sqrt(head_dim))",
            attn_mask=~hidden)
        add("scale is the factor the scores are multiplied by, not a divisor: pass scale=scale",
            attn_mask=~hidden, scale=1.0 / scale)
    return found


def sdpa_diagnosis(got, query, key, value, key_padding_mask=None, causal=False, scale=None) -> str:
    want = sdpa_reference(query, key, value, key_padding_mask, causal, scale)
    if got.shape != want.shape:
        return f"expected an output of shape {tuple(want.shape)} (B, H, T_q, head_dim), got {tuple(got.shape)}"
    if torch.isnan(got).any():
        rows = (want == 0).all(dim=-1)
        if bool(torch.isnan(got[rows]).any()):
            return ("a query whose keys are all hidden (left padding under a causal mask) gives NaN: "
                    "its output must be zeros, as the core's; zero those rows, e.g. "
                    "out.masked_fill(nothing_visible, 0.0)")
        return "your output has NaN"
    for candidate, hint in _sdpa_candidates(query, key, value, key_padding_mask, causal, scale):
        if candidate.shape == got.shape and torch.allclose(got, candidate, atol=1e-5, equal_nan=True):
            return hint
    return ""


def _sdpa_inputs(B, H, T_q, T_k, hd, seed, dtype=torch.float32):
    generator = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(B, H, T, hd, generator=generator, dtype=dtype) for T in (T_q, T_k, T_k))


#: left padding: sequence 0 has 5 real tokens, sequence 1 three, sequence 2 one
_LEFT_PADDING = torch.tensor([[False] * 5, [True, True, False, False, False], [True] * 4 + [False]])


@register("ex-10-sdpa", "Attention with F.scaled_dot_product_attention")
def sdpa(fused_attention):
    """Check ``fused_attention(query, key, value, key_padding_mask=None, causal=False, dropout=0.0,
    training=False, scale=None)`` against the package's core."""

    def run(*tensors, **options):
        tensors = tuple(t.clone() for t in tensors)
        if options.get("key_padding_mask") is not None:
            options["key_padding_mask"] = options["key_padding_mask"].clone()
        try:
            out = fused_attention(*tensors, **options)
        except RuntimeError as err:
            message = str(err).splitlines()[0]
            if options.get("key_padding_mask") is not None and ("size" in message or "expand" in message
                                                                or "shape" in message):
                raise Hint(f"a key padding mask made your code fail ({message}): SDPA's attn_mask "
                           "broadcasts to (B, H, T_q, T_k), so reshape key_padding_mask (B, T_k) to "
                           "(B, 1, 1, T_k) (and invert it)") from None
            raise
        if not isinstance(out, torch.Tensor):
            raise Hint(f"return the attention output as a tensor, got {type(out).__name__}")
        return out.detach()

    def compare(tensors, what, **options):
        got = run(*tensors, **options)
        masks = {k: v for k, v in options.items() if k in ("key_padding_mask", "causal", "scale")}
        want = sdpa_reference(*tensors, **masks)
        if got.shape == want.shape and torch.allclose(got, want, atol=1e-5):
            return
        raise Hint(sdpa_diagnosis(got, *tensors, **masks) or (
            f"{what}: the output differs from the core, softmax(q k^T * scale + mask) v with the "
            "book's mask turned into SDPA's"))

    def no_mask():
        compare(_sdpa_inputs(2, 2, 5, 5, 4, seed=0), "no mask")

    def causal():
        compare(_sdpa_inputs(2, 3, 6, 6, 4, seed=1), "causal", causal=True)

    def padding():
        padded = torch.tensor([[False, False, False, True], [False, True, True, True]])
        compare(_sdpa_inputs(2, 2, 3, 4, 8, seed=2), "padding", key_padding_mask=padded)

    def padding_and_causal():
        compare(_sdpa_inputs(3, 2, 5, 5, 4, seed=3), "left padding and a causal mask",
                key_padding_mask=_LEFT_PADDING, causal=True)

    def scale():
        compare(_sdpa_inputs(2, 2, 4, 4, 4, seed=4), "scale=0.3", causal=True, scale=0.3)

    def eval_dropout():
        tensors = _sdpa_inputs(2, 2, 5, 5, 4, seed=5)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(6)
            first = run(*tensors, causal=True, dropout=0.5, training=False)
            second = run(*tensors, causal=True, dropout=0.5, training=False)
        if not torch.equal(first, second):
            raise Hint("dropout is active with training=False: pass dropout_p=dropout if training else "
                       "0.0; SDPA has no training flag of its own and drops whenever dropout_p > 0")
        if not torch.allclose(first, sdpa_reference(*tensors, causal=True), atol=1e-5):
            raise Hint("with training=False the output must equal the output without dropout")

    def train_dropout():
        from .ch07 import from_memory_dropout_verdict

        B, H, T, p = 4, 2, 6, 0.5
        generator = torch.Generator().manual_seed(7)
        query, key = (torch.randn(B, H, T, 8, generator=generator) for _ in range(2))
        value = torch.eye(T).expand(B, H, T, T).contiguous()  # output row = weight row
        eval_weights = sdpa_reference(query, key, value, causal=True)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(8)
            first = run(query, key, value, causal=True, dropout=p, training=True)
            second = run(query, key, value, causal=True, dropout=p, training=True)
        problem = from_memory_dropout_verdict(first.double(), eval_weights.double(), second.double(), p)
        if problem:
            raise Hint(problem.replace("nn.Dropout(dropout)", "dropout_p=dropout")
                       .replace("create self.dropout = ", "pass "))

    def uses_sdpa():
        # judged on what the function does (the grader's rule, checks/rules.py): each call must
        # reach F.scaled_dot_product_attention, by whatever name; a core written by hand, even
        # in a helper named scaled_dot_product_attention, does not
        query, key, value = _sdpa_inputs(3, 2, 5, 5, 4, seed=10)
        check_operations("ex-10-sdpa", fused_attention, query, key, value,
                         key_padding_mask=_LEFT_PADDING.clone(), causal=True)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(11)
            check_operations("ex-10-sdpa", fused_attention, query, key, value, causal=True,
                             dropout=0.5, training=True)

    def unchanged():
        tensors = _sdpa_inputs(2, 2, 4, 4, 4, seed=9)
        copies = [t.clone() for t in tensors]
        padded = torch.tensor([[False, False, False, True], [False] * 4])
        mine = padded.clone()
        fused_attention(*copies, key_padding_mask=mine, causal=True)
        if not all(torch.equal(a, b) for a, b in zip(copies, tensors)) or not torch.equal(mine, padded):
            raise Hint("your function changed its inputs in place; build new tensors instead")

    return [
        ("padding and causal together (left padding: rows with nothing visible are 0)", padding_and_causal),
        ("no mask", no_mask),
        ("causal mask", causal),
        ("key padding, B != T_q", padding),
        ("a given scale", scale),
        ("training=False: dropout off", eval_dropout),
        ("training=True: weights dropped with p, the rest scaled by 1 / (1 - p)", train_dropout),
        Guard("calls F.scaled_dot_product_attention", uses_sdpa),
        Guard("leaves the inputs unchanged", unchanged),
    ]


# ---------------------------------------------------------------- ex-10-cached-generation
# Greedy generation for chapter 9's GPT with the learner's own KV cache, written around the
# model's parts (token_embedding, position_embedding, blocks with ln_1, attn, ln_2, mlp, ln_f,
# lm_head). Checked from the outside: the same tokens as generating without a cache, and a
# forward hook on the key projections counts the rows each call projects.


def cache_test_model(n_layer=2, d_model=32, n_head=4, vocab_size=40, context_length=24, seed=0):
    """A small GPT whose logits are far apart (weights scaled up), so greedy has no ties."""
    from ..gpt import GPT, GPTConfig

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = GPT(GPTConfig(vocab_size=vocab_size, context_length=context_length, d_model=d_model,
                              n_layer=n_layer, n_head=n_head,
                              # the book's core: every T x T product, all counted (the counter
                              # does not know PyTorch's CPU flash kernel)
                              fused_attention=False)).eval()
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.mul_(8.0)
    return model


@torch.no_grad()
def greedy_without_cache(model, ids, max_new_tokens):
    """The reference: a full forward pass over the whole text for every new token."""
    for _ in range(max_new_tokens):
        next_id = model(ids)[:, -1].argmax(dim=-1, keepdim=True)
        ids = torch.cat([ids, next_id], dim=1)
    return ids


@torch.no_grad()
def cached_variant(model, ids, max_new_tokens, restart_positions=False, prefill_causal=True,
                   final_norm=True, upper_left=False):
    """Cached greedy generation; the keywords make one classic mistake (for the hints)."""
    cache = [None] * len(model.blocks)
    out, new_ids, position = ids, ids, 0
    for _ in range(max_new_tokens):
        T = new_ids.shape[1]
        start = 0 if restart_positions else position
        x = model.token_embedding(new_ids) + model.position_embedding(torch.arange(start, start + T))
        for index, block in enumerate(model.blocks):
            attn, h = block.attn, block.ln_1(x)
            B, H, hd = h.shape[0], attn.num_heads, attn.head_dim
            q, k, v = (layer(h).view(B, T, H, hd).transpose(1, 2)
                       for layer in (attn.W_query, attn.W_key, attn.W_value))
            if cache[index] is not None:
                k, v = torch.cat([cache[index][0], k], dim=2), torch.cat([cache[index][1], v], dim=2)
            cache[index] = (k, v)
            total = k.shape[2]
            hidden = torch.ones(T, total, dtype=torch.bool).triu(1 if upper_left else total - T + 1)
            scores = q @ k.transpose(-2, -1) / hd ** 0.5
            if prefill_causal:
                scores = scores.masked_fill(hidden, float("-inf"))
            context = torch.softmax(scores, dim=-1) @ v
            x = x + attn.out_proj(context.transpose(1, 2).reshape(B, T, H * hd))
            x = x + block.mlp(block.ln_2(x))
        last = model.ln_f(x[:, -1]) if final_norm else x[:, -1]
        next_id = model.lm_head(last).argmax(dim=-1, keepdim=True)
        out, new_ids, position = torch.cat([out, next_id], dim=1), next_id, position + T
    return out


_CACHE_MISTAKES = (
    (dict(restart_positions=True), "every step gives the new token position 0: token t sits at position t "
     "(the prompt's length plus the tokens generated so far), so add position_embedding(t)"),
    (dict(prefill_causal=False), "the prompt's tokens see each other without the causal mask: the first step "
     "reads the whole prompt at once and needs the mask (the lower-right one, which for the prompt is the "
     "ordinary causal mask)"),
    (dict(final_norm=False), "the final layer norm is missing: the GPT applies model.ln_f to the stream "
     "before model.lm_head"),
    (dict(upper_left=True), "the causal mask is aligned to the upper left (is_causal=True does that): the new "
     "token sits after every cached one and must see all of them, the lower-right mask"),
)


def count_key_rows(model):
    """A forward hook on every block's W_key that adds up the rows (tokens) it projects."""
    counted = [0]

    def hook(module, inputs, output):
        counted[0] += output.shape[:-1].numel()

    handles = [block.attn.W_key.register_forward_hook(hook) for block in model.blocks]
    return counted, handles


@register("ex-10-cached-generation", "Cache the GPT: generation with a KV cache")
def cached_generation(generate_cached):
    """Check ``generate_cached(model, ids, max_new_tokens) -> (B, P + max_new_tokens)`` ids."""

    def run(model, ids, n):
        with torch.random.fork_rng(devices=[]):
            out = generate_cached(model, ids.clone(), n)
        if not isinstance(out, torch.Tensor):
            raise Hint(f"return the ids as a tensor, got {type(out).__name__}")
        return out.detach()

    def same_tokens(P, n, seed, **sizes):
        model = cache_test_model(seed=seed, **sizes)
        generator = torch.Generator().manual_seed(seed + 1)
        ids = torch.randint(0, model.config.vocab_size, (2, P), generator=generator)
        got, want = run(model, ids, n), greedy_without_cache(model, ids, n)
        if got.shape == (2, n) and torch.equal(got, want[:, P:]):
            raise Hint("return the prompt followed by the new tokens, (B, P + max_new_tokens), as the "
                       "generation loops of chapter 9 do")
        if got.shape != want.shape:
            raise Hint(f"a prompt (2, {P}) and {n} new tokens must give ids of shape {tuple(want.shape)}, "
                       f"got {tuple(got.shape)}")
        if torch.equal(got, want):
            return
        for keywords, hint in _CACHE_MISTAKES:
            if torch.equal(got, cached_variant(model, ids, n, **keywords)):
                raise Hint(hint)
        first = int((got != want).any(dim=0).float().argmax())
        raise Hint(f"the tokens differ from generation without a cache from position {first} on: each step "
                   "must compute what a full forward pass computes for the last token: embeddings at the "
                   "right position, every block with the cached keys and values of all earlier tokens, ln_f, "
                   "lm_head, argmax")

    def projects_new_tokens_only():
        model = cache_test_model(seed=5)
        P, n = 6, 8
        ids = torch.randint(0, model.config.vocab_size, (2, P), generator=torch.Generator().manual_seed(6))
        counted, handles = count_key_rows(model)
        try:
            got = run(model, ids, n)
        finally:
            for handle in handles:
                handle.remove()
        if got.shape != (2, P + n) or not torch.equal(got, greedy_without_cache(model, ids, n)):
            raise Hint(VALUES_FIRST)
        layers = len(model.blocks)
        most = 2 * (P + n) * layers  # the prompt once, then one new token per step
        if counted[0] > most:
            full = 2 * sum(range(P, P + n)) * layers
            raise Hint(f"the key projections read {counted[0]} token rows (without a cache: {full}; with one: at "
                       f"most {most}): each step must project only the new token and take the earlier keys "
                       "and values from the cache")

    def unchanged():
        model = cache_test_model(seed=7)
        before = {name: p.detach().clone() for name, p in model.named_parameters()}
        ids = torch.randint(0, 40, (1, 3), generator=torch.Generator().manual_seed(8))
        mine = ids.clone()
        run(model, mine, 4)
        changed = [name for name, p in model.named_parameters() if not torch.equal(p.detach(), before[name])]
        if changed or not torch.equal(mine, ids):
            raise Hint("your generation changed the model's parameters or the prompt: it must only read them")

    return [
        ("same tokens as without a cache (prompt of 5, 10 new)", lambda: same_tokens(5, 10, 0)),
        ("a prompt of one token, up to the context length", lambda: same_tokens(1, 15, 2, context_length=16)),
        ("another GPT: 3 layers, 6 heads", lambda: same_tokens(4, 6, 3, n_layer=3, d_model=24, n_head=6)),
        ("each step projects only the new token", projects_new_tokens_only),
        Guard("leaves the model and the prompt unchanged", unchanged),
    ]
