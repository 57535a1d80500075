"""Self-checks of chapter 3 (softmax and the 1/sqrt(d_k) scale): ``from attention_book.checks import ch03``."""

from __future__ import annotations

import math
from unittest import mock

import torch

from .core import Hint, close, register

__all__ = ["stable_softmax", "scaled_weights", "temperature_softmax"]

KEEPDIM = (
    "a shape mismatch while broadcasting: reduce with keepdim=True, e.g. "
    "scores.amax(dim=dim, keepdim=True), so the row max and the row sum keep shape (rows, 1)"
)
WRONG_DIM = (
    "wrong softmax dim: your columns sum to 1 but each row (one query) must; "
    "normalise along dim=-1 (the keys)"
)
OVERFLOW = (
    "overflow: torch.exp(1000.) is inf in float32 and inf / inf is nan. Subtract each row's "
    "maximum (scores.amax(dim, keepdim=True)) before torch.exp: softmax does not change when the "
    "same number is subtracted from every score, and then no exponent is above 0"
)


def _random(*shape, seed: int, scale: float = 1.0) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return scale * torch.randn(*shape, generator=generator)


def _run(fn, *args, **kwargs) -> torch.Tensor:
    try:
        out = fn(*args, **kwargs)
    except RuntimeError as err:
        message = str(err)
        if "must match the size" in message or "size of tensor" in message:
            raise Hint(f"{KEEPDIM} ({message.splitlines()[0]})") from None
        raise
    if not isinstance(out, torch.Tensor):
        raise Hint(f"return a torch.Tensor, got {type(out).__name__}")
    return out.detach()


def _softmax_diagnosis(out: torch.Tensor, scores: torch.Tensor, dim: int = -1) -> None:
    """Raise the most specific hint for a wrong softmax of ``scores`` along ``dim``."""
    if out.shape != scores.shape:
        raise Hint(f"softmax keeps the shape of the scores {tuple(scores.shape)}, got {tuple(out.shape)}")
    if not torch.isfinite(out).all():
        raise Hint(OVERFLOW)
    if close(out, torch.softmax(scores, dim=dim), atol=1e-5):
        return
    other = 0 if dim in (-1, scores.ndim - 1) else -1
    if scores.ndim > 1 and close(out, torch.softmax(scores, dim=other), atol=1e-5):
        raise Hint(WRONG_DIM if other == 0 else "you ignored the dim argument: normalise along dim")
    if close(out, scores / scores.sum(dim=dim, keepdim=True), atol=1e-5):
        raise Hint("you divided the scores by their sum: exponentiate first, weights = exp(s) / sum(exp(s))")
    if close(out, torch.exp(scores), atol=1e-5):
        raise Hint("you forgot to divide by the sum of the exponentials, so the rows do not sum to 1")
    raise Hint("the weights differ from softmax: exp(s - max) / sum(exp(s - max)) along dim")


@register("ex-03-stable-softmax", "A numerically stable softmax")
def stable_softmax(softmax_fn):
    """Check ``softmax_fn(scores, dim=-1)`` against :func:`torch.softmax`, including huge scores."""
    scores = _random(3, 5, seed=0)  # (3 queries, 5 keys)

    def rows():
        _softmax_diagnosis(_run(softmax_fn, scores), scores, dim=-1)

    def huge():
        big = torch.tensor([[1000.0, 1001.0, 1002.0], [-5.0, 0.0, 5.0]])
        out = _run(softmax_fn, big)
        if not torch.isfinite(out).all():
            raise Hint(OVERFLOW)
        if not close(out, torch.softmax(big, dim=-1), atol=1e-5):
            raise Hint("with scores [1000, 1001, 1002] the weights must be [0.0900, 0.2447, 0.6652]")

    def very_negative():
        tiny = torch.tensor([[-1000.0, -1001.0, -1002.0]])
        out = _run(softmax_fn, tiny)
        if not torch.isfinite(out).all():
            raise Hint(
                "underflow: exp(-1000.) is 0, so the sum is 0 and 0 / 0 is nan. Subtracting the row "
                "maximum fixes this too: the largest exponent becomes exactly 0 and exp(0) = 1"
            )
        if not close(out, torch.softmax(tiny, dim=-1), atol=1e-5):
            raise Hint("with scores [-1000, -1001, -1002] the weights must be [0.6652, 0.2447, 0.0900]")

    def dim_argument():
        out = _run(softmax_fn, scores, dim=0)
        if close(out, torch.softmax(scores, dim=-1), atol=1e-5):
            raise Hint("with dim=0 the columns must sum to 1: your function ignores its dim argument")
        _softmax_diagnosis(out, scores, dim=0)

    def from_scratch():
        def refuse(*args, **kwargs):
            raise Hint("build it from torch.exp, .amax and .sum: calling torch.softmax is not allowed here")

        with mock.patch.object(torch, "softmax", refuse), mock.patch.object(
            torch.nn.functional, "softmax", refuse
        ), mock.patch.object(torch.Tensor, "softmax", refuse):
            _run(softmax_fn, scores)

    return [
        ("each row sums to 1 and matches torch.softmax", rows),
        ("no overflow for scores around 1000", huge),
        ("no 0/0 for scores around -1000", very_negative),
        ("respects the dim argument", dim_argument),
        ("written without torch.softmax", from_scratch),
    ]


@register("ex-03-scaled-weights", "Scaled dot-product attention weights")
def scaled_weights(weights_fn):
    """Check ``weights_fn(queries, keys)`` -> ``softmax(queries @ keys.T / sqrt(d_k), dim=-1)``."""
    queries = _random(4, 8, seed=20)  # (T_q=4, d_k=8)
    keys = _random(5, 8, seed=21)  # (T_k=5, d_k=8)

    def reference(q, k):
        return torch.softmax(q @ k.T / math.sqrt(k.shape[-1]), dim=-1)

    def diagnose(out, q, k):
        d_k, n_keys = k.shape[-1], k.shape[0]
        scores = q @ k.T
        if close(out, reference(q, k), atol=1e-5):
            return
        if out.shape == (k.shape[0], q.shape[0]) and out.shape != scores.shape:
            raise Hint(
                "your weights are transposed, shape (T_k, T_q): compute queries @ keys.T so that "
                "row i belongs to query i"
            )
        if out.shape != scores.shape:
            raise Hint(f"expected shape {tuple(scores.shape)} (T_q, T_k), got {tuple(out.shape)}")
        if close(out, torch.softmax(scores, dim=-1), atol=1e-5):
            raise Hint(
                "missing scale: divide the scores by sqrt(d_k) = keys.shape[-1] ** 0.5 before the "
                "softmax, otherwise large d_k saturates the weights"
            )
        if close(out, torch.softmax(scores / d_k, dim=-1), atol=1e-5):
            raise Hint("you divided by d_k; the scale is 1 / sqrt(d_k): scores / keys.shape[-1] ** 0.5")
        if close(out, torch.softmax(scores / math.sqrt(n_keys), dim=-1), atol=1e-5):
            raise Hint("you scaled by the number of tokens; d_k is the width of a key: keys.shape[-1]")
        if close(out, torch.softmax(scores / math.sqrt(d_k), dim=0), atol=1e-5):
            raise Hint(WRONG_DIM)
        if close(out, torch.softmax(scores * math.sqrt(d_k), dim=-1), atol=1e-5):
            raise Hint("you multiplied by sqrt(d_k); divide the scores by it")
        if torch.isfinite(out).all() and close(out.sum(dim=-1), torch.ones(out.shape[0]), atol=1e-4):
            raise Hint("each row sums to 1 but the numbers differ from softmax(queries @ keys.T / sqrt(d_k))")
        raise Hint("expected softmax(queries @ keys.T / sqrt(d_k), dim=-1)")

    def shape():
        out = _run(weights_fn, queries, keys)
        if tuple(out.shape) == (5, 4):
            raise Hint(
                "your weights are transposed, shape (T_k, T_q) = (5, 4): compute queries @ keys.T "
                "so that row i belongs to query i"
            )
        if tuple(out.shape) != (4, 5):
            raise Hint(f"4 queries and 5 keys must give (4, 5) weights, got {tuple(out.shape)}")

    def values():
        diagnose(_run(weights_fn, queries, keys), queries, keys)

    def d_k_from_keys():
        q, k = _random(4, 32, seed=22), _random(5, 32, seed=23)  # d_k = 32 this time
        out = _run(weights_fn, q, k)
        if close(out, torch.softmax(q @ k.T / math.sqrt(8), dim=-1), atol=1e-5):
            raise Hint(
                "with d_k=32 you still divided by sqrt(8): read d_k from keys.shape[-1] inside the "
                "function instead of using a fixed number or a global variable"
            )
        diagnose(out, q, k)

    def large_scores():
        q, k = _random(3, 16, seed=24, scale=40.0), _random(4, 16, seed=25, scale=40.0)
        out = _run(weights_fn, q, k)
        if not torch.isfinite(out).all():
            raise Hint(OVERFLOW)
        diagnose(out, q, k)

    return [
        ("(T_q, T_k) weights", shape),
        ("softmax(Q K^T / sqrt(d_k)) by rows", values),
        ("d_k read from keys.shape[-1]", d_k_from_keys),
        ("no nan for large scores", large_scores),
    ]


@register("ex-03-temperature", "Softmax with a temperature")
def temperature_softmax(softmax_fn):
    """Check ``softmax_fn(scores, temperature)`` -> ``softmax(scores / temperature, dim=-1)``."""
    scores = _random(2, 6, seed=30, scale=2.0)  # (2 queries, 6 keys)

    def at_one():
        out = _run(softmax_fn, scores, 1.0)
        _softmax_diagnosis(out, scores, dim=-1)

    def hot_and_cold():
        for temperature in (0.5, 4.0):
            out = _run(softmax_fn, scores, temperature)
            if close(out, torch.softmax(scores / temperature, dim=-1), atol=1e-5):
                continue
            if close(out, torch.softmax(scores * temperature, dim=-1), atol=1e-5):
                raise Hint(
                    "you multiplied by the temperature; divide by it: a high temperature must "
                    "flatten the weights, a low one sharpen them"
                )
            if close(out, torch.softmax(scores, dim=-1), atol=1e-5):
                raise Hint("the temperature changes nothing in your result: use softmax(scores / temperature)")
            _softmax_diagnosis(out, scores / temperature, dim=-1)

    def cold_limit():
        out = _run(softmax_fn, scores, 0.01)  # scores / 0.01 reach a few hundred: overflow risk
        if not torch.isfinite(out).all():
            raise Hint(OVERFLOW)
        if not close(out, torch.softmax(scores / 0.01, dim=-1), atol=1e-4):
            raise Hint("at temperature 0.01 the weights should be (nearly) one-hot on each row's largest score")

    def rejects_zero():
        try:
            softmax_fn(scores, 0.0)
        except ValueError:
            return
        except ZeroDivisionError:
            pass
        raise Hint(
            "temperature=0 must raise ValueError (dividing by 0 gives inf and nan weights): "
            "add `if temperature <= 0: raise ValueError(...)`"
        )

    return [
        ("temperature 1 is the ordinary softmax", at_one),
        ("divides the scores by the temperature", hot_and_cold),
        ("stable at a low temperature", cold_limit),
        ("temperature <= 0 raises ValueError", rejects_zero),
    ]
