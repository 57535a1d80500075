"""Hidden tests of chapter 6 (instructor only: never copied to the book or the student release).

Format: see attention_book.instructor.hidden (and instructor/README.md). Each test gets the
student's namespace ``ns`` and raises Hint("what is wrong and how to fix it") when it fails.
"""

import torch

from attention_book.instructor.hidden import Hint, answer, hidden_test, randn


def _reference_cross(x, context, W_query, W_key, W_value):
    queries, keys, values = x @ W_query, context @ W_key, context @ W_value
    weights = torch.softmax(queries @ keys.T / keys.shape[-1] ** 0.5, dim=-1)
    return weights @ values, weights


def _pair(result):
    if not isinstance(result, (tuple, list)) or len(result) != 2 or not all(
            isinstance(t, torch.Tensor) for t in result):
        raise Hint("cross_attention must return the pair (context_vectors, attention_weights)")
    return result


# ---------------------------------------------------------------- ex-06-cross


@hidden_test("ex-06-cross", "one query token and a one-token context (T = 1)")
def cross_single_tokens(ns):
    cross_attention = answer(ns, "cross_attention")
    W_query, W_key, W_value = randn(3, 2, seed=1), randn(4, 2, seed=2), randn(4, 5, seed=3)
    for T_q, T_kv in ((1, 1), (1, 7), (3, 1)):
        x, context = randn(T_q, 3, seed=4), randn(T_kv, 4, seed=5)
        out, weights = _pair(cross_attention(x, context, W_query, W_key, W_value))
        if tuple(weights.shape) != (T_q, T_kv) or tuple(out.shape) != (T_q, 5):
            raise Hint(f"for T_q={T_q} and T_kv={T_kv} expected weights {(T_q, T_kv)} and context vectors "
                       f"{(T_q, 5)}, got {tuple(weights.shape)} and {tuple(out.shape)}: keep every "
                       "dimension (no .squeeze())")
        expected_out, expected_weights = _reference_cross(x, context, W_query, W_key, W_value)
        if not (torch.allclose(weights.detach(), expected_weights, atol=1e-5)
                and torch.allclose(out.detach(), expected_out, atol=1e-5)):
            raise Hint(f"wrong values for T_q={T_q}, T_kv={T_kv}; with a one-token context every weight is 1 "
                       "and each context vector is that token's value")


@hidden_test("ex-06-cross", "large scores and a long context stay finite")
def cross_large_scores(ns):
    cross_attention = answer(ns, "cross_attention")
    x, context = randn(4, 3, seed=6, scale=30.0), randn(50, 4, seed=7, scale=30.0)
    W_query, W_key, W_value = randn(3, 2, seed=8), randn(4, 2, seed=9), randn(4, 3, seed=10)
    out, weights = _pair(cross_attention(x, context, W_query, W_key, W_value))
    if not (torch.isfinite(out).all() and torch.isfinite(weights).all()):
        raise Hint("scores in the thousands gave inf or nan: use torch.softmax (or subtract each row's "
                   "maximum before torch.exp) instead of exp(scores) / sum")
    expected_out, expected_weights = _reference_cross(x, context, W_query, W_key, W_value)
    if not (torch.allclose(weights.detach(), expected_weights, atol=1e-5)
            and torch.allclose(out.detach(), expected_out, atol=1e-3)):
        raise Hint("with large scores and 50 context tokens the result differs from "
                   "softmax(Q K^T / sqrt(d_k)) and weights @ values")


VALUES_FIRST = ("not checked until the values are right: {what} differ from the right answer's, "
                "so their gradients cannot match yet (the other tests say what is wrong)")


@hidden_test("ex-06-cross", "gradients reach W_query, W_key and W_value")
def cross_gradients(ns):
    cross_attention = answer(ns, "cross_attention")
    x, context = randn(3, 4, seed=11), randn(5, 2, seed=12)
    matrices = [randn(4, 3, seed=13), randn(2, 3, seed=14), randn(2, 2, seed=15)]
    mine = [m.clone().requires_grad_(True) for m in matrices]
    reference = [m.clone().requires_grad_(True) for m in matrices]
    upstream = randn(3, 2, seed=16)
    out, _ = _pair(cross_attention(x, context, *mine))
    if out.grad_fn is None:
        raise Hint("the context vectors are cut off from the weight matrices (no grad_fn): keep it a "
                   "torch computation, without .detach(), .numpy() or torch.tensor(...)")
    expected = _reference_cross(x, context, *matrices)[0]
    if out.shape != expected.shape or not torch.allclose(out.detach(), expected, atol=1e-5):
        raise Hint(VALUES_FIRST.format(what="the context vectors"))
    (out * upstream).sum().backward()
    (_reference_cross(x, context, *reference)[0] * upstream).sum().backward()
    for name, got, want in zip(("W_query", "W_key", "W_value"), mine, reference):
        if got.grad is None or not torch.allclose(got.grad, want.grad, atol=1e-5):
            raise Hint(f"the gradient of {name} is missing or wrong: the context vectors must be computed "
                       f"from {name} with differentiable torch operations")


# ---------------------------------------------------------------- ex-06-padding


def _reference_padded(scores, key_padding_mask):
    mask = key_padding_mask[:, None, :]
    fully_padded = mask.all(dim=-1, keepdim=True)
    weights = torch.softmax(scores.masked_fill(mask & ~fully_padded, float("-inf")), dim=-1)
    return weights.masked_fill(fully_padded, 0.0)


def _weights(padded_softmax, scores, mask):
    result = padded_softmax(scores, mask)
    if not isinstance(result, torch.Tensor) or result.shape != scores.shape:
        shape = tuple(result.shape) if isinstance(result, torch.Tensor) else type(result).__name__
        raise Hint(f"the weights must have the scores' shape {tuple(scores.shape)}, got {shape}")
    return result


@hidden_test("ex-06-padding", "padding anywhere: left padding and holes")
def padding_anywhere(ns):
    padded_softmax = answer(ns, "padded_softmax")
    scores = randn(3, 2, 5, seed=20)
    mask = torch.tensor([[True, True, False, False, False],   # left padding
                         [False, True, False, True, False],   # holes
                         [False, False, False, False, False]])  # no padding at all
    weights = _weights(padded_softmax, scores.clone(), mask.clone()).detach()
    if torch.isnan(weights).any():
        raise Hint("NaN although no sequence is all padding (left padding and holes in the mask)")
    if not torch.allclose(weights, _reference_padded(scores, mask), atol=1e-6):
        raise Hint("padding is not always at the end: hide exactly the keys where key_padding_mask is True "
                   "(masked_fill with key_padding_mask[:, None, :]), do not derive lengths from the mask")


@hidden_test("ex-06-padding", "a fully padded sequence in the middle of the batch, T_q = 1")
def padding_fully_padded_middle(ns):
    padded_softmax = answer(ns, "padded_softmax")
    scores = randn(3, 1, 4, seed=21)
    mask = torch.tensor([[False, False, True, True],
                         [True, True, True, True],   # all padding
                         [False, False, False, True]])
    weights = _weights(padded_softmax, scores.clone(), mask.clone()).detach()
    if torch.isnan(weights).any():
        raise Hint("the fully padded sequence (number 1 of 3) gave NaN: decide per sequence, "
                   "key_padding_mask.all(dim=-1), which rows to zero")
    if not torch.allclose(weights, _reference_padded(scores, mask), atol=1e-6):
        raise Hint("with sequence 1 of 3 fully padded (and T_q = 1) its weights must be all 0 while the "
                   "other sequences keep rows that sum to 1 over their real keys: decide per sequence")


@hidden_test("ex-06-padding", "no NaN in the gradients of a fully padded sequence")
def padding_gradients(ns):
    padded_softmax = answer(ns, "padded_softmax")
    scores = randn(2, 3, 4, seed=22).requires_grad_(True)
    mask = torch.tensor([[False, False, False, True], [True, True, True, True]])
    upstream = randn(2, 3, 4, seed=23)
    weights = _weights(padded_softmax, scores, mask.clone())
    if weights.grad_fn is None:
        raise Hint("the weights are cut off from the scores (no grad_fn): keep it a torch computation")
    (weights * upstream).sum().backward()
    if scores.grad is None or torch.isnan(scores.grad).any():
        raise Hint("the forward pass has no NaN but the backward pass has: the softmax of an all -inf row "
                   "was computed (e.g. scores + an additive -inf mask) and the NaN only hidden afterwards "
                   "(masked_fill, nan_to_num, torch.where). Leave fully padded rows unmasked for the "
                   "softmax and zero them afterwards")
    reference = scores.detach().clone().requires_grad_(True)
    expected = _reference_padded(reference, mask)
    if not torch.allclose(weights.detach(), expected.detach(), atol=1e-5):
        raise Hint(VALUES_FIRST.format(what="the weights"))
    (expected * upstream).sum().backward()
    if not torch.allclose(scores.grad, reference.grad, atol=1e-5):
        raise Hint("the gradient with respect to the scores is wrong: hide padded keys with -inf before "
                   "the softmax and zero fully padded rows afterwards")


# ---------------------------------------------------------------- ex-06-find-the-bug-half
# The code as given fills with -1e9, which float16 cannot hold. The first test is the exercise's
# main value test (the scorer's main-value rule).


def _half_case(ns, dtype, seed, shift=0.0, shape=(2, 3, 4)):
    from attention_book.checks.ch06 import half_reference

    padded_weights = answer(ns, "padded_weights")
    B, T_q, T_k = shape
    scores = (randn(*shape, seed=seed, scale=3.0) + shift).to(dtype)
    pad = torch.zeros(B, T_k, dtype=torch.bool)
    pad[0, -1] = True
    pad[-1, 0] = True
    try:
        result = padded_weights(scores, pad)
    except RuntimeError:
        raise Hint(f"{dtype} scores made your code raise: the fill value must fit the scores' dtype "
                   "(-1e9 does not fit in float16): use float('-inf') or torch.finfo(scores.dtype).min") from None
    want = half_reference(scores, pad)
    if not isinstance(result, torch.Tensor) or tuple(result.shape) != tuple(want.shape):
        raise Hint(f"{dtype} scores of shape {shape}: expected weights of shape {tuple(want.shape)}")
    if result.dtype != dtype:
        raise Hint(f"{dtype} scores must give {dtype} weights, got {result.dtype}")
    if not torch.allclose(result.float(), want.float(), atol=1e-2 if dtype == torch.float16 else 1e-5):
        raise Hint(f"{dtype} scores: the weights differ from a softmax over the real keys")
    if bool((result.float()[pad[:, None, :].expand_as(result)] != 0).any()):
        raise Hint(f"{dtype} scores: the padded keys must get weight exactly 0")


@hidden_test("ex-06-find-the-bug-half", "float16 scores of other sizes", weight=2)
def half_float16(ns):
    _half_case(ns, torch.float16, 90)
    _half_case(ns, torch.float16, 91, shape=(3, 1, 6))


@hidden_test("ex-06-find-the-bug-half", "float32 scores, ordinary and very negative")
def half_float32(ns):
    _half_case(ns, torch.float32, 92)
    _half_case(ns, torch.float32, 93, shift=-50000.0)


@hidden_test("ex-06-find-the-bug-half", "the inputs stay unchanged", guard=True)
def half_unchanged(ns):
    padded_weights = answer(ns, "padded_weights")
    padded_weights(randn(2, 3, 4, seed=94), torch.tensor([[False, False, True, True], [False] * 4]))
    if padded_weights.mutated:
        raise Hint("your function changed its inputs in place; use masked_fill (no underscore)")
