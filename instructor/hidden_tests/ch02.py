"""Hidden tests of chapter 2 (instructor only: never copied to the book or the student release).

Format: see attention_book.instructor.hidden (and instructor/README.md). Each test gets the
student's namespace ``ns`` and raises Hint("what is wrong and how to fix it") when it fails.
"""

from unittest import mock

import torch

from attention_book.instructor.hidden import Hint, answer, hidden_test, randn


def _shape(result):
    return tuple(result.shape) if isinstance(result, torch.Tensor) else type(result).__name__


# ---------------------------------------------------------------- ex-02-score-loop


@hidden_test("ex-02-score-loop", "built from dot products in loops, not one matrix product")
def score_loop_uses_loops(ns):
    scores_by_loop = answer(ns, "scores_by_loop")
    queries, keys = randn(3, 4, seed=20), randn(2, 4, seed=21)
    original_matmul, original_rmatmul = torch.Tensor.__matmul__, torch.Tensor.__rmatmul__

    def refuse(*args, **kwargs):
        raise Hint("the exercise asks for two loops of torch.dot(queries[i], keys[j]); a single matrix "
                   "product (queries @ keys.T, torch.matmul, torch.mm, torch.einsum) skips the point "
                   "of it: fill the (T_q, T_k) matrix entry by entry")

    def only_vectors(original):
        def guarded(a, b):  # a @ b of two vectors is a dot product: allowed inside the loops
            if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.dim() >= 2 and b.dim() >= 2:
                refuse()
            return original(a, b)
        return guarded

    with mock.patch.object(torch.Tensor, "__matmul__", only_vectors(original_matmul)), \
            mock.patch.object(torch.Tensor, "__rmatmul__", only_vectors(original_rmatmul)), \
            mock.patch.object(torch, "matmul", only_vectors(torch.matmul)), \
            mock.patch.object(torch.Tensor, "matmul", only_vectors(torch.Tensor.matmul)), \
            mock.patch.object(torch, "mm", refuse), mock.patch.object(torch.Tensor, "mm", refuse), \
            mock.patch.object(torch, "einsum", refuse):
        result = scores_by_loop(queries, keys)
    if not isinstance(result, torch.Tensor) or not torch.allclose(result.detach(), queries @ keys.T, atol=1e-5):
        raise Hint("for 3 queries and 2 keys the result should be the (3, 2) matrix of dot products "
                   "queries[i] . keys[j]")


@hidden_test("ex-02-score-loop", "a single query or a single key (T = 1)")
def score_loop_single_token(ns):
    scores_by_loop = answer(ns, "scores_by_loop")
    for T_q, T_k in ((1, 1), (1, 6), (4, 1)):
        queries, keys = randn(T_q, 3, seed=22), randn(T_k, 3, seed=23)
        result = scores_by_loop(queries, keys)
        if not isinstance(result, torch.Tensor) or tuple(result.shape) != (T_q, T_k):
            raise Hint(f"{T_q} {'query' if T_q == 1 else 'queries'} and {T_k} key{'' if T_k == 1 else 's'} must give a ({T_q}, {T_k}) matrix, got "
                       f"{_shape(result)}: keep both dimensions even when one of them is 1 (no .squeeze())")
        if not torch.allclose(result.detach(), queries @ keys.T, atol=1e-5):
            raise Hint(f"for {T_q} {'query' if T_q == 1 else 'queries'} and {T_k} key{'' if T_k == 1 else 's'} the values differ from the dot products "
                       "queries[i] . keys[j]")


# ---------------------------------------------------------------- ex-02-projected-scores


@hidden_test("ex-02-projected-scores", "a single token (T = 1)")
def projected_single_token(ns):
    projected_scores = answer(ns, "projected_scores")
    inputs, W_query, W_key = randn(1, 5, seed=24), randn(5, 3, seed=25), randn(5, 3, seed=26)
    result = projected_scores(inputs, W_query, W_key)
    if not isinstance(result, torch.Tensor) or tuple(result.shape) != (1, 1):
        raise Hint(f"one token must give a (1, 1) score matrix, got {_shape(result)}: keep both "
                   "dimensions (no .squeeze(), no .item())")
    expected = (inputs @ W_query) @ (inputs @ W_key).T
    if not torch.allclose(result.detach(), expected, atol=1e-5):
        raise Hint("for one token the score is (x W_q) . (x W_k); your value differs")


VALUES_FIRST = ("not checked until the values are right: {what} differ from the right answer's, "
                "so their gradients cannot match yet (the other tests say what is wrong)")


@hidden_test("ex-02-projected-scores", "gradients reach both W_query and W_key")
def projected_gradients(ns):
    projected_scores = answer(ns, "projected_scores")
    inputs = randn(4, 3, seed=27)
    W_query = randn(3, 2, seed=28).requires_grad_(True)
    W_key = randn(3, 2, seed=29).requires_grad_(True)
    upstream = randn(4, 4, seed=30)
    result = projected_scores(inputs, W_query, W_key)
    if not isinstance(result, torch.Tensor) or result.grad_fn is None:
        raise Hint("the result is not connected to the weights: keep it a torch computation "
                   "(no .detach(), .numpy(), .item() or torch.tensor(...))")
    expected = (inputs @ W_query.detach()) @ (inputs @ W_key.detach()).T
    if result.shape != expected.shape or not torch.allclose(result.detach(), expected, atol=1e-4):
        raise Hint(VALUES_FIRST.format(what="the scores"))
    (result * upstream).sum().backward()
    reference_q, reference_k = W_query.detach().clone().requires_grad_(), W_key.detach().clone().requires_grad_()
    (((inputs @ reference_q) @ (inputs @ reference_k).T) * upstream).sum().backward()
    for name, got, want in (("W_query", W_query.grad, reference_q.grad), ("W_key", W_key.grad, reference_k.grad)):
        if got is None or not torch.count_nonzero(got):
            raise Hint(f"no gradient reaches {name}: both projections must stay connected to their "
                       f"weights (do not .detach() or copy {name} or its projection)")
        if not torch.allclose(got, want, atol=1e-4):
            raise Hint(f"the gradient of {name} is wrong: compute (inputs @ W_query) @ (inputs @ W_key).T "
                       "with plain tensor operations")


@hidden_test("ex-02-projected-scores", "float64 inputs stay float64")
def projected_float64(ns):
    projected_scores = answer(ns, "projected_scores")
    inputs = randn(3, 4, seed=31, dtype=torch.float64)
    W_query, W_key = randn(4, 5, seed=32, dtype=torch.float64), randn(4, 5, seed=33, dtype=torch.float64)
    result = projected_scores(inputs, W_query, W_key)
    if not isinstance(result, torch.Tensor) or result.dtype != torch.float64:
        dtype = result.dtype if isinstance(result, torch.Tensor) else type(result).__name__
        raise Hint(f"float64 inputs must give float64 scores, got {dtype}: do not convert with .float() "
                   "or build a new tensor; the matrix products keep the dtype by themselves")
    if not torch.allclose(result.detach(), (inputs @ W_query) @ (inputs @ W_key).T, atol=1e-10):
        raise Hint("in float64 the scores differ from (inputs @ W_query) @ (inputs @ W_key).T")


# ---------------------------------------------------------------- ex-02-point-at
# The student's matrices come back as data; the scores are computed here, in the grader.


def _pointing_scores(student, target):
    pair = student.call("pointing_projections", target)
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
    return (inputs.double() @ W_query.double()) @ (inputs.double() @ W_key.double()).T  # (6, 6)


def _points_at(student, target, word):
    scores = _pointing_scores(student, target)
    top2 = scores.topk(2, dim=-1)
    if not bool((top2.indices[:, 0] == target).all()):
        rows = [i for i in range(scores.shape[0]) if int(top2.indices[i, 0]) != target]
        raise Hint(f"for target {target} ('{word}') the queries of rows {rows} score another key highest: "
                   "all queries need a common direction, and the target's key must reach furthest in it")
    margin = float((top2.values[:, 0] - top2.values[:, 1]).min())
    if margin < 0.1:
        raise Hint(f"for target {target} ('{word}') the smallest margin is {margin:.3f} < 0.1: scale W_key up")


@hidden_test("ex-02-point-at", "every query points at 'Your' (target 0) by a margin of 0.1")
def point_at_your(student, reference):
    _points_at(student, 0, "Your")


@hidden_test("ex-02-point-at", "every query points at 'one' (target 4) by a margin of 0.1")
def point_at_one(student, reference):
    _points_at(student, 4, "one")


@hidden_test("ex-02-point-at", "every query points at 'step' (target 5) by a margin of 0.1")
def point_at_step(student, reference):
    _points_at(student, 5, "step")


# ---------------------------------------------------------------- ex-02-additive-scores

def _additive(session, **sizes):
    return session.probe("ch02.additive", **sizes)


@hidden_test("ex-02-additive-scores", "one query, one key, a hidden width of 1")
def additive_single(student, reference):
    sizes = dict(seed=7, T_q=1, T_k=1, d_q=2, d_k=3, d_h=1)
    got, _ = _additive(student, **sizes)
    want, _ = _additive(reference, **sizes)
    if not isinstance(got, torch.Tensor) or got.shape != want.shape or not torch.allclose(got, want, atol=1e-5):
        raise Hint(f"one query and one key must give a (1, 1) score {want.tolist()}, got {_shape(got)}: "
                   "keep the (T_q, T_k) layout even for T = 1 (no squeeze)")


@hidden_test("ex-02-additive-scores", "wider hidden layer, gradients reach v")
def additive_gradients(student, reference):
    sizes = dict(seed=8, T_q=3, T_k=7, d_q=4, d_k=2, d_h=5)
    got, got_grad = _additive(student, **sizes)
    want, want_grad = _additive(reference, **sizes)
    if not isinstance(got, torch.Tensor) or got.shape != want.shape or not torch.allclose(got, want, atol=1e-5):
        raise Hint(f"for 3 queries and 7 keys expected scores of shape {tuple(want.shape)} equal to "
                   f"v . tanh(q W_query + k W_key), got {_shape(got)}")
    if not isinstance(got_grad, torch.Tensor) or not torch.allclose(got_grad, want_grad, atol=1e-5):
        raise Hint("v gets no (or a wrong) gradient: keep the scores a torch computation of v "
                   "(no .detach(), .item() or numpy)")


# ---------------------------------------------------------------- ex-02-find-the-bug-batch
# The code as given (`queries @ keys.T`) is right for 2-D tensors only; the first test is the
# exercise's main value test (the scorer's main-value rule).


def _batch_case(ns, shape_q, shape_k, seed, what):
    batch_scores = answer(ns, "batch_scores")
    queries, keys = randn(*shape_q, seed=seed), randn(*shape_k, seed=seed + 1)
    try:
        result = batch_scores(queries, keys)
    except (RuntimeError, ValueError) as err:
        raise Hint(f"{what}: your code raised {type(err).__name__}; transpose the last two dimensions of keys "
                   "only (keys.transpose(-2, -1) or keys.mT): .T reverses every dimension") from None
    expected = queries @ keys.transpose(-2, -1)
    if not isinstance(result, torch.Tensor) or tuple(result.shape) != tuple(expected.shape):
        raise Hint(f"{what}: expected scores of shape {tuple(expected.shape)}, got {_shape(result)}")
    if not torch.allclose(result, expected, atol=1e-5):
        raise Hint(f"{what}: entry [b, i, j] must be queries[b, i] . keys[b, j] (raw scores, not scaled); "
                   "transpose the last two dimensions of keys only")


@hidden_test("ex-02-find-the-bug-batch", "batches of other sizes, B = T_k = d_k included", weight=2)
def batch_scores_batches(ns):
    _batch_case(ns, (3, 5, 2), (3, 4, 2), 40, "a batch (3, 5, 2) x (3, 4, 2)")
    _batch_case(ns, (4, 1, 4), (4, 4, 4), 42, "a batch with B = T_k = d_k = 4")


@hidden_test("ex-02-find-the-bug-batch", "heads and one sequence: (B, H, T, d) and (T, d)")
def batch_scores_other_ranks(ns):
    _batch_case(ns, (2, 2, 3, 4), (2, 2, 5, 4), 44, "a batch of heads (2, 2, 3, 4) x (2, 2, 5, 4)")
    _batch_case(ns, (1, 3), (2, 3), 46, "one sequence (1, 3) x (2, 3)")


@hidden_test("ex-02-find-the-bug-batch", "the inputs stay unchanged", guard=True)
def batch_scores_unchanged(ns):
    batch_scores = answer(ns, "batch_scores")
    batch_scores(randn(2, 3, 4, seed=48), randn(2, 5, 4, seed=49))
    if batch_scores.mutated:
        raise Hint("your function changed its inputs in place; compute a new tensor instead")
