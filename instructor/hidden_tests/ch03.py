"""Hidden tests of chapter 3 (instructor only: never copied to the book or the student release).

Format: see attention_book.instructor.hidden (and instructor/README.md). Each test gets the
student's namespace ``ns`` and raises Hint("what is wrong and how to fix it") when it fails.
"""

import math

import torch

from attention_book.instructor.hidden import Hint, answer, hidden_test


def _randn(*shape, seed, scale=1.0, dtype=torch.float32):
    return scale * torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


def _tensor(result, what):
    if not isinstance(result, torch.Tensor):
        raise Hint(f"{what} must return a torch.Tensor, got {type(result).__name__}")
    return result.detach()


IN_PLACE = ("your function changed the tensor passed in (an in-place operation such as `-=`, `/=`, "
            "`.sub_()` or `.exp_()`): the caller's {what} must stay as they were, so write "
            "`shifted = scores - ...` to get a new tensor")


# ---------------------------------------------------------------- ex-03-stable-softmax


@hidden_test("ex-03-stable-softmax", "the scores passed in stay unchanged")
def softmax_no_mutation(ns):
    my_softmax = answer(ns, "my_softmax")
    scores = _randn(3, 4, seed=1, scale=3.0)
    before = scores.clone()
    my_softmax(scores)
    my_softmax(scores, dim=0)
    if not torch.equal(scores, before):
        raise Hint(IN_PLACE.format(what="scores"))


@hidden_test("ex-03-stable-softmax", "a (B, T, T) batch along dim=1 and dim=-1")
def softmax_three_dims(ns):
    my_softmax = answer(ns, "my_softmax")
    scores = _randn(2, 3, 4, seed=2, scale=2.0)
    for dim in (-1, 1):
        result = _tensor(my_softmax(scores.clone(), dim=dim), "my_softmax")
        if tuple(result.shape) != (2, 3, 4):
            raise Hint(f"scores of shape (2, 3, 4) must give weights of shape (2, 3, 4) for dim={dim}, "
                       f"got {tuple(result.shape)}: reduce with keepdim=True")
        if not torch.allclose(result, torch.softmax(scores, dim=dim), atol=1e-5):
            raise Hint(f"for 3-D scores and dim={dim} the weights differ from torch.softmax(scores, dim={dim}): "
                       "use the dim argument for the max and for the sum (no .T, no fixed axis)")


@hidden_test("ex-03-stable-softmax", "masked (-inf) scores get weight 0, float64 stays float64")
def softmax_masked_float64(ns):
    my_softmax = answer(ns, "my_softmax")
    scores = torch.tensor([[0.5, float("-inf"), 2.0], [float("-inf"), float("-inf"), -1.0]], dtype=torch.float64)
    result = _tensor(my_softmax(scores.clone()), "my_softmax")
    if result.dtype != torch.float64:
        raise Hint(f"float64 scores must give float64 weights, got {result.dtype}: do not convert the dtype")
    if not torch.isfinite(result).all():
        raise Hint("scores of -inf (hidden keys) gave nan or inf: exp(-inf - max) is 0, so they should "
                   "simply get weight 0; subtract the row maximum (not the global one) before torch.exp")
    if not torch.allclose(result, torch.softmax(scores, dim=-1), atol=1e-12):
        raise Hint("with -inf entries the weights differ from torch.softmax: a -inf score must get "
                   "weight exactly 0 and the other weights of its row still sum to 1")


# ---------------------------------------------------------------- ex-03-scaled-weights


@hidden_test("ex-03-scaled-weights", "a single query or a single key (T = 1)")
def scaled_single_token(ns):
    scaled_weights = answer(ns, "scaled_weights")
    for T_q, T_k in ((1, 1), (1, 6), (3, 1)):
        queries, keys = _randn(T_q, 8, seed=3), _randn(T_k, 8, seed=4)
        result = _tensor(scaled_weights(queries, keys), "scaled_weights")
        if tuple(result.shape) != (T_q, T_k):
            raise Hint(f"{T_q} query(s) and {T_k} key(s) must give ({T_q}, {T_k}) weights, got "
                       f"{tuple(result.shape)}: keep both dimensions (no .squeeze())")
        expected = torch.softmax(queries @ keys.T / math.sqrt(8), dim=-1)
        if not torch.allclose(result, expected, atol=1e-5):
            raise Hint(f"for {T_q} query(s) and {T_k} key(s) the weights differ from "
                       "softmax(queries @ keys.T / sqrt(d_k), dim=-1); with one key every weight is 1")


@hidden_test("ex-03-scaled-weights", "queries and keys stay unchanged")
def scaled_no_mutation(ns):
    scaled_weights = answer(ns, "scaled_weights")
    queries, keys = _randn(3, 16, seed=5), _randn(4, 16, seed=6)
    before = (queries.clone(), keys.clone())
    first = _tensor(scaled_weights(queries, keys), "scaled_weights")
    if not (torch.equal(queries, before[0]) and torch.equal(keys, before[1])):
        raise Hint(IN_PLACE.format(what="queries and keys"))
    second = _tensor(scaled_weights(queries, keys), "scaled_weights")
    if not torch.allclose(first, second, atol=1e-6):
        raise Hint("two calls with the same queries and keys gave different weights: do not keep state "
                   "between calls")


@hidden_test("ex-03-scaled-weights", "gradients reach queries and keys")
def scaled_gradients(ns):
    scaled_weights = answer(ns, "scaled_weights")
    queries = _randn(3, 4, seed=7).requires_grad_(True)
    keys = _randn(5, 4, seed=8).requires_grad_(True)
    upstream = _randn(3, 5, seed=9)
    result = scaled_weights(queries, keys)
    if not isinstance(result, torch.Tensor) or result.grad_fn is None:
        raise Hint("the weights are cut off from queries and keys (no grad_fn): keep it a torch "
                   "computation, without .detach(), .numpy(), .item() or torch.tensor(...)")
    (result * upstream).sum().backward()
    q_ref, k_ref = queries.detach().clone().requires_grad_(), keys.detach().clone().requires_grad_()
    (torch.softmax(q_ref @ k_ref.T / 2.0, dim=-1) * upstream).sum().backward()
    for name, got, want in (("queries", queries.grad, q_ref.grad), ("keys", keys.grad, k_ref.grad)):
        if got is None or not torch.allclose(got, want, atol=1e-5):
            raise Hint(f"the gradient with respect to the {name} is missing or wrong: compute the weights "
                       "from the given tensors with differentiable torch operations")


# ---------------------------------------------------------------- ex-03-temperature


@hidden_test("ex-03-temperature", "a negative temperature raises ValueError")
def temperature_negative(ns):
    softmax_with_temperature = answer(ns, "softmax_with_temperature")
    scores = _randn(2, 4, seed=10)
    for temperature in (-1.0, -0.5):
        try:
            softmax_with_temperature(scores.clone(), temperature)
        except ValueError:
            continue
        except ZeroDivisionError:
            pass
        raise Hint(f"temperature={temperature} must raise ValueError, not only 0: test "
                   "`if temperature <= 0: raise ValueError(...)`")


@hidden_test("ex-03-temperature", "a (B, T_q, T_k) batch normalised over the last dimension")
def temperature_batch(ns):
    softmax_with_temperature = answer(ns, "softmax_with_temperature")
    scores = _randn(2, 3, 5, seed=11, scale=2.0)
    for temperature in (0.3, 2.0):
        result = _tensor(softmax_with_temperature(scores.clone(), temperature), "softmax_with_temperature")
        if tuple(result.shape) != (2, 3, 5):
            raise Hint(f"scores of shape (2, 3, 5) must give weights of shape (2, 3, 5), got "
                       f"{tuple(result.shape)}: reduce with keepdim=True along dim=-1")
        if not torch.allclose(result, torch.softmax(scores / temperature, dim=-1), atol=1e-5):
            raise Hint("for 3-D scores the weights differ from softmax(scores / temperature, dim=-1): take "
                       "the max and the sum over the last dimension (dim=-1), not dim=1")


@hidden_test("ex-03-temperature", "the scores passed in stay unchanged")
def temperature_no_mutation(ns):
    softmax_with_temperature = answer(ns, "softmax_with_temperature")
    scores = _randn(3, 4, seed=12)
    before = scores.clone()
    softmax_with_temperature(scores, 0.5)
    softmax_with_temperature(scores, 3.0)
    if not torch.equal(scores, before):
        raise Hint(IN_PLACE.format(what="scores").replace("`shifted = scores - ...`",
                                                          "`scaled = scores / temperature`"))
