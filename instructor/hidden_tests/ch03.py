"""Hidden tests of chapter 3 (instructor only: never copied to the book or the student release).

Format: see attention_book.instructor.hidden (and instructor/README.md). Each test gets the
student's namespace ``ns`` and raises Hint("what is wrong and how to fix it") when it fails.
"""

import math

import torch

from attention_book.instructor.hidden import Hint, answer, hidden_test, randn


def _tensor(result, what):
    if not isinstance(result, torch.Tensor):
        raise Hint(f"{what} must return a torch.Tensor, got {type(result).__name__}")
    return result.detach()


IN_PLACE = ("your function changed the tensor passed in (an in-place operation such as `-=`, `/=`, "
            "`.sub_()` or `.exp_()`): the caller's {what} must stay as they were, so write "
            "`shifted = scores - ...` to get a new tensor")


# ---------------------------------------------------------------- ex-03-stable-softmax


@hidden_test("ex-03-stable-softmax", "the scores passed in stay unchanged", guard=True)
def softmax_no_mutation(ns):
    my_softmax = answer(ns, "my_softmax")
    scores = randn(3, 4, seed=1, scale=3.0)
    my_softmax(scores)
    my_softmax(scores, dim=0)
    if my_softmax.mutated:  # the kernel's copy changed in place (the grader's stays as it was)
        raise Hint(IN_PLACE.format(what="scores"))


@hidden_test("ex-03-stable-softmax", "a (B, T, T) batch along dim=1 and dim=-1")
def softmax_three_dims(ns):
    my_softmax = answer(ns, "my_softmax")
    scores = randn(2, 3, 4, seed=2, scale=2.0)
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
        queries, keys = randn(T_q, 8, seed=3), randn(T_k, 8, seed=4)
        result = _tensor(scaled_weights(queries, keys), "scaled_weights")
        if tuple(result.shape) != (T_q, T_k):
            raise Hint(f"{T_q} {'query' if T_q == 1 else 'queries'} and {T_k} key{'' if T_k == 1 else 's'} must give ({T_q}, {T_k}) weights, got "
                       f"{tuple(result.shape)}: keep both dimensions (no .squeeze())")
        expected = torch.softmax(queries @ keys.T / math.sqrt(8), dim=-1)
        if not torch.allclose(result, expected, atol=1e-5):
            raise Hint(f"for {T_q} {'query' if T_q == 1 else 'queries'} and {T_k} key{'' if T_k == 1 else 's'} the weights differ from "
                       "softmax(queries @ keys.T / sqrt(d_k), dim=-1); with one key every weight is 1")


@hidden_test("ex-03-scaled-weights", "queries and keys stay unchanged", guard=True)
def scaled_no_mutation(ns):
    scaled_weights = answer(ns, "scaled_weights")
    queries, keys = randn(3, 16, seed=5), randn(4, 16, seed=6)
    first = _tensor(scaled_weights(queries, keys), "scaled_weights")
    if scaled_weights.mutated:
        raise Hint(IN_PLACE.format(what="queries and keys"))
    second = _tensor(scaled_weights(queries, keys), "scaled_weights")
    if not torch.allclose(first, second, atol=1e-6):
        raise Hint("two calls with the same queries and keys gave different weights: do not keep state "
                   "between calls")


VALUES_FIRST = ("not checked until the values are right: {what} differ from the right answer's, "
                "so their gradients cannot match yet (the other tests say what is wrong)")


@hidden_test("ex-03-scaled-weights", "gradients reach queries and keys")
def scaled_gradients(ns):
    scaled_weights = answer(ns, "scaled_weights")
    queries = randn(3, 4, seed=7).requires_grad_(True)
    keys = randn(5, 4, seed=8).requires_grad_(True)
    upstream = randn(3, 5, seed=9)
    result = scaled_weights(queries, keys)
    if not isinstance(result, torch.Tensor) or result.grad_fn is None:
        raise Hint("the weights are cut off from queries and keys (no grad_fn): keep it a torch "
                   "computation, without .detach(), .numpy(), .item() or torch.tensor(...)")
    expected = torch.softmax(queries.detach() @ keys.detach().T / 2.0, dim=-1)  # d_k = 4
    if result.shape != expected.shape or not torch.allclose(result.detach(), expected, atol=1e-5):
        raise Hint(VALUES_FIRST.format(what="the weights"))
    (result * upstream).sum().backward()
    q_ref, k_ref = queries.detach().clone().requires_grad_(), keys.detach().clone().requires_grad_()
    (torch.softmax(q_ref @ k_ref.T / 2.0, dim=-1) * upstream).sum().backward()
    for name, got, want in (("queries", queries.grad, q_ref.grad), ("keys", keys.grad, k_ref.grad)):
        if got is None or not torch.allclose(got, want, atol=1e-5):
            raise Hint(f"the gradient with respect to the {name} is missing or wrong: compute the weights "
                       "from the given tensors with differentiable torch operations")


# ---------------------------------------------------------------- ex-03-temperature


@hidden_test("ex-03-temperature", "a negative temperature raises ValueError", guard=True)
def temperature_negative(ns):
    softmax_with_temperature = answer(ns, "softmax_with_temperature")
    scores = randn(2, 4, seed=10)
    for temperature in (-1.0, -0.5):
        try:
            softmax_with_temperature(scores.clone(), temperature)
        except ValueError:
            continue
        except ZeroDivisionError:
            pass
        raise Hint(f"temperature={temperature} must raise ValueError, not only 0: check that the "
                   "temperature is positive before dividing by it")


@hidden_test("ex-03-temperature", "a (B, T_q, T_k) batch normalised over the last dimension")
def temperature_batch(ns):
    softmax_with_temperature = answer(ns, "softmax_with_temperature")
    scores = randn(2, 3, 5, seed=11, scale=2.0)
    for temperature in (0.3, 2.0):
        result = _tensor(softmax_with_temperature(scores.clone(), temperature), "softmax_with_temperature")
        if tuple(result.shape) != (2, 3, 5):
            raise Hint(f"scores of shape (2, 3, 5) must give weights of shape (2, 3, 5), got "
                       f"{tuple(result.shape)}: reduce with keepdim=True along dim=-1")
        if not torch.allclose(result, torch.softmax(scores / temperature, dim=-1), atol=1e-5):
            raise Hint("for 3-D scores the weights differ from softmax(scores / temperature, dim=-1): take "
                       "the max and the sum over the last dimension (dim=-1), not dim=1")


@hidden_test("ex-03-temperature", "the scores passed in stay unchanged", guard=True)
def temperature_no_mutation(ns):
    softmax_with_temperature = answer(ns, "softmax_with_temperature")
    scores = randn(3, 4, seed=12)
    softmax_with_temperature(scores, 0.5)
    softmax_with_temperature(scores, 3.0)
    if softmax_with_temperature.mutated:
        raise Hint(IN_PLACE.format(what="scores").replace("`shifted = scores - ...`",
                                                          "`scaled = scores / ...`"))


# ---------------------------------------------------------------- ex-03-attend
# The student's matrices come back as data; the attention weights are computed here, in the
# grader, on the journey inputs (no value the kernel computes is trusted).


def _attend_weights(student, target, share):
    pair = student.call("attending_projections", target, share)
    if not isinstance(pair, (tuple, list)) or len(pair) != 2:
        raise Hint(f"return a pair (W_query, W_key), got {type(pair).__name__}")
    W_query, W_key = pair
    for name, matrix in (("W_query", W_query), ("W_key", W_key)):
        if not isinstance(matrix, torch.Tensor) or matrix.ndim != 2 or matrix.shape[0] != 3:
            raise Hint(f"{name} must be a (3, d_k) tensor (used as inputs @ {name})")
    if W_query.shape != W_key.shape:
        raise Hint("W_query and W_key need the same d_k: queries and keys meet in a dot product")
    from attention_book.data import journey_inputs

    _, inputs = journey_inputs()
    W_query, W_key = W_query.double(), W_key.double()
    scores = (inputs.double() @ W_query) @ (inputs.double() @ W_key).T  # (6, 6)
    return torch.softmax(scores / W_key.shape[-1] ** 0.5, dim=-1)


@hidden_test("ex-03-attend", "every token attends to 'Your' (target 0) with share 0.995")
def attend_your(student, reference):
    weights = _attend_weights(student, 0, 0.995)
    if not bool((weights[:, 0] >= 0.995).all()):
        raise Hint(f"the smallest weight on 'Your' is {weights[:, 0].min():.3f} < 0.995: widen the gaps "
                   "between the scores (scale W_key up)")


@hidden_test("ex-03-attend", "every token attends to 'one' (target 4) with share 0.995")
def attend_one(student, reference):
    weights = _attend_weights(student, 4, 0.995)
    if not bool((weights[:, 4] >= 0.995).all()):
        raise Hint(f"the smallest weight on 'one' is {weights[:, 4].min():.3f} < 0.995: the key direction "
                   "must make 'one' score highest in every row, with wide gaps")


@hidden_test("ex-03-attend", "every token attends to 'step' (target 5) with share 0.995")
def attend_step(student, reference):
    weights = _attend_weights(student, 5, 0.995)
    if not bool((weights[:, 5] >= 0.995).all()):
        raise Hint(f"the smallest weight on 'step' is {weights[:, 5].min():.3f} < 0.995: the key direction "
                   "must make 'step' score highest in every row, with wide gaps")


# ---------------------------------------------------------------- ex-03-soft-cap


@hidden_test("ex-03-soft-cap", "float64 and a single score row, gradients flow")
def soft_cap_float64_gradient(ns):
    cap_scores = answer(ns, "cap_scores")
    scores = (30.0 * torch.randn(7, generator=torch.Generator().manual_seed(9), dtype=torch.float64))
    scores.requires_grad_()
    result = cap_scores(scores, 20.0)
    if not isinstance(result, torch.Tensor) or result.dtype != torch.float64 or result.shape != (7,):
        raise Hint("a float64 row of 7 scores must come back as a float64 row of 7: no .float(), no reshaping")
    expected = 20.0 * torch.tanh(scores.detach() / 20.0)
    if not torch.allclose(result.detach(), expected, atol=1e-10):
        raise Hint("with cap=20 the result differs from cap * tanh(scores / cap)")
    result.sum().backward()
    if scores.grad is None or not torch.allclose(scores.grad, 1 - torch.tanh(scores.detach() / 20.0) ** 2):
        raise Hint("the gradient does not reach the scores: keep it a torch computation (no .detach(), "
                   ".item() or numpy)")


@hidden_test("ex-03-soft-cap", "a tiny cap, and -inf (masked) scores stay at -cap")
def soft_cap_small_and_masked(ns):
    cap_scores = answer(ns, "cap_scores")
    scores = torch.tensor([[0.05, -0.2, 3.0, float("-inf")]])
    result = cap_scores(scores.clone(), 0.1)
    expected = 0.1 * torch.tanh(scores / 0.1)
    if not isinstance(result, torch.Tensor) or not torch.allclose(result, expected, atol=1e-6):
        raise Hint(f"with cap=0.1 expected {expected.tolist()}, got "
                   f"{result.tolist() if isinstance(result, torch.Tensor) else result!r}: "
                   "cap * tanh(scores / cap) for any positive cap (tanh(-inf) is -1)")


@hidden_test("ex-03-soft-cap", "the scores stay unchanged, cap=0 raises ValueError", guard=True)
def soft_cap_guards(ns):
    cap_scores = answer(ns, "cap_scores")
    scores = randn(4, 4, seed=10, scale=60.0)
    cap_scores(scores, 50.0)
    if cap_scores.mutated:  # the kernel's copy changed in place (the grader's stays as it was)
        raise Hint(IN_PLACE.format(what="scores"))
    try:
        cap_scores(scores, 0.0)
    except ValueError:
        return
    except Exception as err:
        raise Hint(f"cap=0 raised {type(err).__name__}; raise a ValueError instead") from None
    raise Hint("cap=0 must raise ValueError: check the argument before dividing by it")


# ---------------------------------------------------------------- ex-03-find-the-bug-axis
# The code as given normalises with dim=1: right for 2-D scores only. The first test is the
# exercise's main value test (the scorer's main-value rule).


def _axis_case(ns, shape_q, shape_k, seed):
    from attention_book.checks.ch03 import _weights_diagnosis, _weights_reference

    attention_weights = answer(ns, "attention_weights")
    queries, keys = randn(*shape_q, seed=seed), randn(*shape_k, seed=seed + 1)
    result = attention_weights(queries, keys)
    if not isinstance(result, torch.Tensor):
        raise Hint(f"attention_weights must return a tensor, got {type(result).__name__}")
    if tuple(result.shape) != (*shape_q[:-1], shape_k[-2]) or not torch.allclose(
            result, _weights_reference(queries, keys), atol=1e-5):
        raise Hint(_weights_diagnosis(result, queries, keys))


@hidden_test("ex-03-find-the-bug-axis", "batches: (3, 2, 5) x (3, 6, 5) and (1, 4, 4, 2) x (1, 4, 3, 2)", weight=2)
def axis_batches(ns):
    _axis_case(ns, (3, 2, 5), (3, 6, 5), 60)
    _axis_case(ns, (1, 4, 4, 2), (1, 4, 3, 2), 62)


@hidden_test("ex-03-find-the-bug-axis", "one sequence and one query: (1, 4) x (3, 4)")
def axis_one_query(ns):
    _axis_case(ns, (1, 4), (3, 4), 64)


@hidden_test("ex-03-find-the-bug-axis", "the inputs stay unchanged", guard=True)
def axis_unchanged(ns):
    attention_weights = answer(ns, "attention_weights")
    attention_weights(randn(2, 3, 4, seed=66), randn(2, 5, 4, seed=67))
    if attention_weights.mutated:
        raise Hint("your function changed its inputs in place; compute a new tensor instead")
