"""Self-checks of chapter 2 (attention scores): ``from attention_book.checks import ch02``."""

from __future__ import annotations

import torch

from ..data import journey_inputs
from .core import Hint, close, register

__all__ = ["score_loop", "projected_scores"]


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


@register("ex-02-score-loop", "Attention scores with a loop of dot products")
def score_loop(scores_by_loop):
    """Check ``scores_by_loop(queries, keys)`` -> ``(T_q, T_k)`` with ``out[i, j] = queries[i] . keys[j]``."""
    queries = _random(3, 4, seed=0)  # (T_q=3, d_k=4)
    keys = _random(5, 4, seed=1)  # (T_k=5, d_k=4)
    expected = queries @ keys.T  # (3, 5)

    def shape():
        out = _as_tensor(scores_by_loop(queries, keys), "scores_by_loop")
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
        out = _as_tensor(scores_by_loop(queries, keys), "scores_by_loop")
        if close(out, expected, atol=1e-4):
            return
        square_q, square_k = _random(4, 4, seed=2), _random(4, 4, seed=3)
        square = _as_tensor(scores_by_loop(square_q, square_k), "scores_by_loop")
        if close(square, (square_q @ square_k.T).T, atol=1e-4):
            raise Hint("your matrix is transposed: out[i, j] must be queries[i] . keys[j], not keys[i] . queries[j]")
        if close(out, torch.zeros_like(expected), atol=1e-6):
            raise Hint("every score is 0: fill the matrix with torch.dot(queries[i], keys[j]) inside both loops")
        raise Hint("the numbers differ from the dot products queries[i] . keys[j]; check the loop indices")

    def journey():
        _, inputs = journey_inputs()
        out = _as_tensor(scores_by_loop(inputs, inputs), "scores_by_loop")
        if not close(out, inputs @ inputs.T, atol=1e-4):
            raise Hint("on the journey inputs the result should equal inputs @ inputs.T (row 2 starts 0.9544, 1.4950)")

    return [
        ("one row per query, one column per key", shape),
        ("out[i, j] = queries[i] . keys[j]", values),
        ("matches inputs @ inputs.T on the journey example", journey),
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
        ("(T, T) scores", shape),
        ("omega = (x W_q)(x W_k)^T", values),
        ("works for any d_in and d_k", other_widths),
        ("gradients reach W_query", differentiable),
    ]
