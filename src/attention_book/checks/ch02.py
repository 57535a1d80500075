"""Self-checks of chapter 2 (attention scores): ``from attention_book.checks import ch02``."""

from __future__ import annotations

import ast

import torch

from ..data import journey_inputs
from .core import Guard, Hint, answer_source, close, register

__all__ = ["score_loop", "projected_scores", "point_at", "additive", "batch_scores"]


def _loop_depth(fn) -> int:
    """The deepest nesting of for-loops (comprehension clauses count) in the answer's code."""
    tree = ast.parse(answer_source(fn))

    def depth(node, level=0):
        here = level + (1 if isinstance(node, (ast.For, ast.AsyncFor, ast.While)) else 0)
        if isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)):
            here = level + len(node.generators)
        return max([here] + [depth(child, here) for child in ast.iter_child_nodes(node)])

    return depth(tree)


def _random(*shape, seed: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=generator)


def _as_tensor(result, what: str) -> torch.Tensor:
    if not isinstance(result, torch.Tensor):
        raise Hint(f"{what} must return a torch.Tensor, got {type(result).__name__}")
    return result.detach()


def _is_shape_error(err: RuntimeError) -> bool:
    message = str(err)
    return any(text in message for text in ("cannot be multiplied", "size mismatch", "must match"))


@register("ex-02-score-loop", "Scores with a loop of dot products")
def score_loop(scores_by_loop):
    """Check ``scores_by_loop(queries, keys)`` -> ``(T_q, T_k)`` with ``out[i, j] = queries[i] . keys[j]``."""
    queries = _random(3, 4, seed=0)  # (T_q=3, d_k=4)
    keys = _random(5, 4, seed=1)  # (T_k=5, d_k=4)
    expected = queries @ keys.T  # (3, 5)

    def call(q, k):
        try:
            return _as_tensor(scores_by_loop(q, k), "scores_by_loop")
        except RuntimeError as err:
            if any(text in str(err) for text in ("cannot be converted to Scalar", "expanded size", "number of sizes provided")):
                raise Hint(
                    "each entry must be one number: sum the products, torch.dot(queries[i], keys[j]) "
                    "(queries[i] * keys[j] alone is a vector)"
                ) from None
            raise
        except IndexError as err:
            raise Hint(
                f"an index ran past the end ({err}): loop i over the queries (queries.shape[0]) "
                "and j over the keys (keys.shape[0]), and use keys[j], not queries[j]"
            ) from None

    def shape():
        out = call(queries, keys)
        if tuple(out.shape) == (5, 3):
            raise Hint(
                "your result has shape (5, 3) = (keys, queries): it is transposed. Row i belongs "
                "to query i, so out[i, j] = torch.dot(queries[i], keys[j]) and the shape is (T_q, T_k)"
            )
        if tuple(out.shape) != (3, 5):
            raise Hint(
                f"3 queries and 5 keys must give a (3, 5) matrix (one row per query), got shape "
                f"{tuple(out.shape)}; create it with torch.empty(queries.shape[0], keys.shape[0])"
            )

    def values():
        out = call(queries, keys)
        if close(out, expected, atol=1e-4):
            return
        if out.shape == expected.shape and close(out[:, :3], expected[:, :3], atol=1e-4):
            raise Hint(
                "only the first 3 columns are right: loop j over all the keys, "
                "range(keys.shape[0]), not over the queries"
            )
        square_q, square_k = _random(4, 4, seed=2), _random(4, 4, seed=3)
        square = call(square_q, square_k)
        if close(square, square_q @ square_q.T, atol=1e-4):
            raise Hint("you took dot products of two queries: the second vector is keys[j]")
        if close(square, (square_q @ square_k.T).T, atol=1e-4):
            raise Hint("your matrix is transposed: out[i, j] must be queries[i] . keys[j], not keys[i] . queries[j]")
        if close(out, torch.zeros_like(expected), atol=1e-6):
            raise Hint("every score is 0: fill the matrix with torch.dot(queries[i], keys[j]) inside both loops")
        raise Hint("the numbers differ from the dot products queries[i] . keys[j]; check the loop indices")

    def journey():
        _, inputs = journey_inputs()
        out = call(inputs, inputs)
        if tuple(out.shape) != (6, 6):
            raise Hint(
                f"6 tokens must give a (6, 6) matrix, got {tuple(out.shape)}: do not hard-code "
                "the sizes, read them from queries.shape[0] and keys.shape[0]"
            )
        if not close(out, inputs @ inputs.T, atol=1e-4):
            raise Hint("on the journey inputs the result should equal inputs @ inputs.T (row 2 starts 0.9544, 1.4950)")

    def two_loops():
        if _loop_depth(scores_by_loop) < 2:
            raise Hint(
                "the exercise asks for two loops, one over the queries and one inside it over the "
                "keys, with torch.dot for each entry (the matrix product comes next in the chapter)"
            )

    return [
        Guard("one row per query, one column per key", shape),
        ("out[i, j] = queries[i] . keys[j]", values),
        ("matches inputs @ inputs.T on the journey example", journey),
        Guard("computed with two loops", two_loops),
    ]


@register("ex-02-projected-scores", "Scores from trainable projections")
def projected_scores(scores_fn):
    """Check ``scores_fn(inputs, W_query, W_key)`` -> ``(T, T)`` raw scores ``(x W_q)(x W_k)^T``."""
    inputs = _random(5, 3, seed=10)  # (T=5, d_in=3)
    W_query = _random(3, 4, seed=11)  # (d_in=3, d_k=4)
    W_key = _random(3, 4, seed=12)
    queries, keys = inputs @ W_query, inputs @ W_key  # (5, 4) each
    expected = queries @ keys.T  # (5, 5)
    orientation = (
        "the weights have shape (d_in, d_out) = (3, 4) in this course, so project with "
        "inputs @ W_query and inputs @ W_key (not W @ inputs, not inputs @ W.T), then take queries @ keys.T"
    )

    def call(x, wq, wk):
        try:
            return _as_tensor(scores_fn(x, wq, wk), "your function")
        except RuntimeError as err:
            if not _is_shape_error(err):
                raise  # reported as a crash by the self-check machinery
            raise Hint(f"a matrix product failed ({str(err).splitlines()[0]}); {orientation}") from None

    def shape():
        out = call(inputs, W_query, W_key)
        if tuple(out.shape) != (5, 5):
            raise Hint(
                f"5 tokens must give a (5, 5) score matrix, got shape {tuple(out.shape)}; {orientation}"
            )

    def values():
        out = call(inputs, W_query, W_key)
        if close(out, expected, atol=1e-4):
            return
        if bool((out == 0).all()):
            raise Hint("every score is 0: compute (inputs @ W_query) @ (inputs @ W_key).T")
        if close(out, expected.T, atol=1e-4):
            raise Hint(
                "your matrix is transposed (keys @ queries.T): row i must hold query i's scores, "
                "so compute queries @ keys.T"
            )
        if close(out, inputs @ inputs.T, atol=1e-4):
            raise Hint("these are the scores of the raw inputs: first project them with W_query and W_key")
        if close(out, queries @ queries.T, atol=1e-4):
            raise Hint("you used W_query for the keys too: keys = inputs @ W_key")
        if close(out, keys @ keys.T, atol=1e-4):
            raise Hint("you used W_key for the queries too: queries = inputs @ W_query")
        if close(out, expected / 2.0, atol=1e-4) or close(out, torch.softmax(expected, dim=-1), atol=1e-4) or close(
            out, torch.softmax(expected / 2.0, dim=-1), atol=1e-4
        ):
            raise Hint("return the raw scores omega = queries @ keys.T: scaling and softmax come in chapter 3")
        raise Hint(f"the scores differ from (inputs @ W_query) @ (inputs @ W_key).T; {orientation}")

    def other_widths():
        # d_k different from the test above and from d_in: catches hard-coded sizes
        x, wq, wk = _random(4, 6, seed=13), _random(6, 2, seed=14), _random(6, 2, seed=15)
        out = call(x, wq, wk)
        if not close(out, (x @ wq) @ (x @ wk).T, atol=1e-4):
            raise Hint("with 4 tokens, d_in=6 and d_k=2 the result is wrong: do not hard-code any size")

    def differentiable():
        wq = W_query.clone().requires_grad_(True)
        out = scores_fn(inputs, wq, W_key)
        if not isinstance(out, torch.Tensor) or out.grad_fn is None:
            raise Hint(
                "the result is cut off from the weights (no grad_fn): do not call .detach(), "
                ".item() or torch.tensor(...) on the way, or training could not update W_query"
            )

    return [
        Guard("(T, T) scores", shape),
        ("omega = (x W_q)(x W_k)^T", values),
        ("works for any d_in and d_k", other_widths),
        Guard("gradients reach W_query", differentiable),
    ]


# --------------------------------------------------------------------------------------------------
# ex-02-point-at: choose W_query and W_key so that every query's highest score is at one key
# --------------------------------------------------------------------------------------------------

POINT_TARGETS = (0, 4, 5)  # "Your", "one", "step": each reaches furthest in some direction
MARGIN = 0.1


def _pair(fn, target):
    out = fn(target)
    if not isinstance(out, (tuple, list)) or len(out) != 2:
        raise Hint(f"return a pair (W_query, W_key), got {type(out).__name__}")
    for name, matrix in zip(("W_query", "W_key"), out):
        if not isinstance(matrix, torch.Tensor):
            raise Hint(f"{name} must be a torch.Tensor, got {type(matrix).__name__}")
        if matrix.ndim != 2 or matrix.shape[0] != 3:
            raise Hint(
                f"{name} has shape {tuple(matrix.shape)}; in this book a projection has shape "
                "(d_in, d_k) = (3, d_k) and is used as inputs @ W (not nn.Linear's (d_k, d_in))"
            )
    if out[0].shape != out[1].shape:
        raise Hint(
            f"W_query {tuple(out[0].shape)} and W_key {tuple(out[1].shape)} need the same d_k: "
            "queries and keys meet in a dot product"
        )
    return out[0].detach().float(), out[1].detach().float()


def _point_test(pointing_projections, target: int):
    tokens, inputs = journey_inputs()

    def test():
        W_query, W_key = _pair(pointing_projections, target)
        scores = (inputs @ W_query) @ (inputs @ W_key).T  # (6, 6)
        if not torch.isfinite(scores).all():
            raise Hint("the scores are not finite: keep the matrices' entries moderate (100 is plenty)")
        picks = scores.argmax(dim=-1)
        wrong = [i for i in range(len(tokens)) if int(picks[i]) != target]
        if wrong:
            names = ", ".join(f"'{tokens[i]}' -> '{tokens[int(picks[i])]}'" for i in wrong)
            raise Hint(
                f"target {target} ('{tokens[target]}'): these queries score another key highest: "
                f"{names}. Every query must point the same way (a positive dot product with one "
                "direction) and the target's key must reach further in that direction than every "
                "other key"
            )
        others = scores.clone()
        others[:, target] = -float("inf")
        gaps = scores[:, target] - others.max(dim=-1).values
        if float(gaps.min()) < MARGIN:
            raise Hint(
                f"target {target} ('{tokens[target]}'): the right key wins every row but by a margin "
                f"of only {float(gaps.min()):.3f} (at least {MARGIN} needed): multiply W_key by a "
                "larger number to widen the gaps"
            )

    return test


@register("ex-02-point-at", "Point every query at one token")
def point_at(pointing_projections):
    """Check ``pointing_projections(target)`` -> ``(W_query, W_key)`` of shape ``(3, d_k)``."""
    tokens, _ = journey_inputs()

    def shapes():
        _pair(pointing_projections, 5)

    def uses_target():
        first, second = _pair(pointing_projections, 0), _pair(pointing_projections, 5)
        if all(torch.equal(a, b) for a, b in zip(first, second)):
            raise Hint(
                "you return the same matrices for every target: the key projection must depend on "
                "`target` (each target needs its own direction)"
            )

    return [
        Guard("returns (W_query, W_key), each (3, d_k)", shapes),
        Guard("the matrices depend on the target", uses_target),
    ] + [
        (f"every query scores '{tokens[t]}' highest (target {t})", _point_test(pointing_projections, t))
        for t in POINT_TARGETS
    ]


# --------------------------------------------------------------------------------------------------
# ex-02-additive-scores: v . tanh(q W_q + k W_k) for every pair
# --------------------------------------------------------------------------------------------------


def _additive_case(seed: int, T_q: int, T_k: int, d_q: int, d_k: int, d_h: int):
    generator = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(*shape, generator=generator)
                 for shape in ((T_q, d_q), (T_k, d_k), (d_q, d_h), (d_k, d_h), (d_h,)))


def _additive_diagnosis(result, queries, keys, W_query, W_key, v):
    projected_q, projected_k = queries @ W_query, keys @ W_key  # (T_q, d_h), (T_k, d_h)
    pairs = projected_q[:, None, :] + projected_k[None, :, :]  # (T_q, T_k, d_h)
    expected = torch.tanh(pairs) @ v
    if close(result, expected):
        return
    if result.shape == expected.T.shape and result.shape != expected.shape:
        raise Hint(
            f"your scores are transposed, shape (T_k, T_q) = {tuple(result.shape)}: row i must belong "
            "to query i, so the queries' hidden vectors need the new axis in the middle: "
            "(T_q, 1, d_h) + (1, T_k, d_h)"
        )
    if result.shape != expected.shape:
        raise Hint(f"expected (T_q, T_k) = {tuple(expected.shape)} scores, got {tuple(result.shape)}")
    if bool((result == 0).all()):
        raise Hint("every score is 0: return v . tanh(queries @ W_query + keys @ W_key) for every pair")
    mistakes = [
        (pairs @ v, "the tanh is missing: squash the sum of the two projections with torch.tanh "
                    "before multiplying with v"),
        (torch.tanh(pairs @ v), "the tanh belongs on the hidden vector of each pair, before v: "
                                "v . tanh(q W_q + k W_k), not tanh(v . (q W_q + k W_k))"),
        (torch.relu(pairs) @ v, "use torch.tanh as the nonlinearity (you used relu)"),
        (torch.sigmoid(pairs) @ v, "use torch.tanh as the nonlinearity (you used sigmoid)"),
        (torch.tanh(pairs).sum(dim=-1), "the hidden values are summed without v: multiply the "
                                        "(T_q, T_k, d_h) hidden tensor with v, hidden @ v"),
        (projected_q @ projected_k.T, "that is the dot product of the projections: additive "
                                      "attention *adds* them, tanh(q W_q + k W_k), then takes v"),
        (torch.tanh(projected_q @ projected_k.T), "that is a dot product inside tanh: additive "
                                                  "attention adds the two projections"),
    ]
    for wrong, hint in mistakes:
        if close(result, wrong):
            raise Hint(hint)
    raise Hint("the scores differ from v . tanh(queries[i] @ W_query + keys[j] @ W_key)")


@register("ex-02-additive-scores", "Additive attention scores")
def additive(additive_attention_scores):
    """Check ``additive_attention_scores(queries, keys, W_query, W_key, v)`` -> ``(T_q, T_k)``."""
    case = _additive_case(seed=40, T_q=4, T_k=5, d_q=3, d_k=2, d_h=6)

    def call(*arguments):
        try:
            result = additive_attention_scores(*[a.clone() for a in arguments])
        except RuntimeError as err:
            message = str(err)
            if "cannot be multiplied" in message:
                raise Hint(
                    f"a matrix product does not fit ({message}): queries (T_q, d_q) go through "
                    "W_query (d_q, d_h), keys (T_k, d_k) through W_key (d_k, d_h)"
                ) from None
            if "must match the size" in message:
                raise Hint(
                    f"the two projections do not add up ({message}): the scores need a hidden vector "
                    "for every pair (i, j), so give them axes that broadcast: "
                    "(T_q, 1, d_h) + (1, T_k, d_h) -> (T_q, T_k, d_h)"
                ) from None
            raise
        return _as_tensor(result, "additive_attention_scores")

    def shape():
        result = call(*case)
        if tuple(result.shape) != (4, 5):
            raise Hint(f"4 queries and 5 keys must give (4, 5) scores, got {tuple(result.shape)}")

    def values():
        _additive_diagnosis(call(*case), *case)

    def other_sizes():
        other = _additive_case(seed=41, T_q=1, T_k=3, d_q=5, d_k=5, d_h=2)
        _additive_diagnosis(call(*other), *other)

    def journey():
        _, inputs = journey_inputs()
        generator = torch.Generator().manual_seed(42)
        W_query, W_key = torch.randn(3, 4, generator=generator), torch.randn(3, 4, generator=generator)
        v = torch.randn(4, generator=generator)
        _additive_diagnosis(call(inputs, inputs, W_query, W_key, v), inputs, inputs, W_query, W_key, v)

    def inputs_unchanged():
        arguments = [a.clone() for a in case]
        additive_attention_scores(*arguments)
        if not all(torch.equal(a, b) for a, b in zip(arguments, case)):
            raise Hint("your function changed one of its arguments in place: compute new tensors instead")

    return [
        Guard("(T_q, T_k) scores", shape),
        ("v . tanh(q W_q + k W_k) for every pair", values),
        ("one query, and queries as wide as the keys", other_sizes),
        ("the journey example, queries = keys = inputs", journey),
        Guard("the arguments stay unchanged", inputs_unchanged),
    ]


# ---------------------------------------------------------------- ex-02-find-the-bug-batch
# Find the bug: `queries @ keys.T` is the transpose only for 2-D keys. On a batch (B, T_k, d_k)
# .T reverses every dimension, (d_k, T_k, B): a shape error, or wrong numbers without any error
# when B = T_k = d_k. The fix transposes the last two dimensions (.transpose(-2, -1), .mT).

DOT_T = (
    "transpose the last two dimensions of keys, whatever comes before them: "
    "keys.transpose(-2, -1) (or keys.mT); `.T` reverses *every* dimension, (B, T_k, d_k) -> "
    "(d_k, T_k, B), and like .transpose(0, 1) it is the transpose only for 2-D tensors"
)


def _batch_scores_diagnosis(out: torch.Tensor, queries: torch.Tensor, keys: torch.Tensor) -> str:
    expected = queries @ keys.transpose(-2, -1)
    if out.shape == expected.shape[:-2] + expected.shape[-1:] + expected.shape[-2:-1] and close(
            out, expected.transpose(-2, -1)):
        return ("your scores are transposed, (..., T_k, T_q): row i must be query i, so compute "
                "queries @ keys.transpose(-2, -1), not keys @ queries.transpose(-2, -1)")
    if out.shape == expected.shape:
        scale = queries.shape[-1] ** 0.5
        if close(out, expected / scale):
            return ("these are raw scores: do not divide by sqrt(d_k) here (that is chapter 3's "
                    "step)")
        if keys.ndim == 3 and keys.shape[0] == keys.shape[1] == keys.shape[2] and close(
                out, queries @ keys.permute(2, 1, 0)):
            return DOT_T + " (with B = T_k = d_k it even runs, and silently returns wrong scores)"
    return ""


@register("ex-02-find-the-bug-batch", "Find the bug: scores for a batch")
def batch_scores(batch_scores):
    """Check the fixed ``batch_scores(queries, keys)`` -> ``(..., T_q, T_k)``."""

    def run(queries, keys, what):
        try:
            out = batch_scores(queries.clone(), keys.clone())
        except RuntimeError as err:
            message = str(err)
            if _is_shape_error(err) or "batch" in message or "size" in message or "dimension" in message:
                raise Hint(f"{what}: your code fails ({str(err).splitlines()[0]}); {DOT_T}") from None
            raise
        return _as_tensor(out, "batch_scores")

    def case(shape_q, shape_k, seed, what):
        queries, keys = _random(*shape_q, seed=seed), _random(*shape_k, seed=seed + 1)
        out = run(queries, keys, what)
        expected = queries @ keys.transpose(-2, -1)
        if out.shape != expected.shape:
            raise Hint(_batch_scores_diagnosis(out, queries, keys) or (
                f"{what}: expected scores of shape {tuple(expected.shape)}, got {tuple(out.shape)}; "
                f"{DOT_T}"))
        if not close(out, expected):
            raise Hint(_batch_scores_diagnosis(out, queries, keys) or (
                f"{what}: entry [b, i, j] must be queries[b, i] . keys[b, j]; {DOT_T}"))

    def unchanged():
        queries, keys = _random(2, 3, 4, seed=9), _random(2, 5, 4, seed=10)
        q, k = queries.clone(), keys.clone()
        batch_scores(q, k)
        if not (torch.equal(q, queries) and torch.equal(k, keys)):
            raise Hint("your function changed its inputs in place; compute a new tensor instead")

    return [
        ("a batch: (2, 4, 3) queries, (2, 5, 3) keys", lambda: case((2, 4, 3), (2, 5, 3), 0, "a batch")),
        ("B = T_k = d_k = 3: no error, right numbers", lambda: case((3, 2, 3), (3, 3, 3), 2,
                                                                     "a batch with B = T_k = d_k")),
        ("heads too: (2, 3, 4, 5) and (2, 3, 6, 5)", lambda: case((2, 3, 4, 5), (2, 3, 6, 5), 4,
                                                                   "a batch of heads (B, H, T, d)")),
        ("one sequence still works: (4, 3) and (6, 3)", lambda: case((4, 3), (6, 3), 6, "one sequence")),
        Guard("leaves the inputs unchanged", unchanged),
    ]
