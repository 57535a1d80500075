"""Self-checks of chapter 3 (softmax and the 1/sqrt(d_k) scale): ``from attention_book.checks import ch03``."""

from __future__ import annotations

import math

import torch

from ..data import journey_inputs
from .core import Guard, Hint, calls, close, register
from .rules import READY_MADE, SOFTMAX_NAMES, rule  # noqa: F401 - the rule's one table (grader too)

__all__ = ["stable_softmax", "scaled_weights", "temperature_softmax", "attend", "soft_cap", "weights_axis"]

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
NOT_THE_MAX = (
    "only the maximum works: you subtracted something else (the row mean or minimum?), so for "
    "scores that lie far apart, such as [-3000, 0, 3000], some exponent is still huge and "
    "overflows. Subtract each row's maximum, scores.amax(dim, keepdim=True): then every "
    "exponent is <= 0"
)
WHOLE_TENSOR_MAX = (
    "you subtracted the maximum of the whole tensor; subtract each row's own maximum, "
    "scores.amax(dim=dim, keepdim=True): a row far below the overall maximum underflows to 0 / 0"
)
CHANGED_INPUT = (
    "your function changed `scores` in place (e.g. `scores -= ...`): the caller's tensor is "
    "overwritten. Compute a new tensor instead: shifted = scores - scores.amax(...)"
)


def _random(*shape, seed: int, scale: float = 1.0) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return scale * torch.randn(*shape, generator=generator)


def _run(fn, *args, **kwargs) -> torch.Tensor:
    # copies: an answer that changes its input in place must not spoil the next test's data
    args = tuple(a.clone() if isinstance(a, torch.Tensor) else a for a in args)
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


def _is_zeros(out: torch.Tensor) -> bool:
    return bool(torch.isfinite(out).all()) and bool((out == 0).all())


def _softmax_diagnosis(out: torch.Tensor, scores: torch.Tensor, dim: int = -1) -> None:
    """Raise the most specific hint for a wrong softmax of ``scores`` along ``dim``."""
    if out.shape != scores.shape:
        raise Hint(f"softmax keeps the shape of the scores {tuple(scores.shape)}, got {tuple(out.shape)}")
    if not torch.isfinite(out).all():
        raise Hint(OVERFLOW)
    if close(out, torch.softmax(scores, dim=dim), atol=1e-5):
        return
    if _is_zeros(out):
        raise Hint("every weight is 0: compute exp(s - max) / sum(exp(s - max)) along dim")
    other = 0 if dim in (-1, scores.ndim - 1) else -1
    if scores.ndim > 1 and close(out, torch.softmax(scores, dim=other), atol=1e-5):
        raise Hint(WRONG_DIM if other == 0 else "you ignored the dim argument: normalise along dim")
    if close(out, scores, atol=1e-6):
        raise Hint("you returned the scores unchanged: turn them into weights with exp and a sum")
    if close(out, scores / scores.sum(dim=dim, keepdim=True), atol=1e-5):
        raise Hint("you divided the scores by their sum: exponentiate first, weights = exp(s) / sum(exp(s))")
    if close(out, torch.exp(scores), atol=1e-5) or close(
        out, torch.exp(scores - scores.amax(dim=dim, keepdim=True)), atol=1e-5
    ):
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
        if out.shape == big.shape and torch.isfinite(out[0]).all() and not torch.isfinite(out[1]).all():
            raise Hint(WHOLE_TENSOR_MAX)
        if not torch.isfinite(out).all():
            raise Hint(OVERFLOW)
        if not close(out, torch.softmax(big, dim=-1), atol=1e-5):
            _softmax_diagnosis(out, big)
            raise Hint("with scores [1000, 1001, 1002] the weights must be [0.0900, 0.2447, 0.6652]")

    def far_apart():
        # Only the maximum makes every exponent <= 0 here: the mean is 0, the minimum -3000.
        spread = torch.tensor([[-3000.0, 0.0, 3000.0], [2000.0, 2500.0, 1000.0]])
        out = _run(softmax_fn, spread)
        if not torch.isfinite(out).all():
            mild = _run(softmax_fn, torch.tensor([[1000.0, 1001.0, 1002.0]]))
            raise Hint(NOT_THE_MAX if torch.isfinite(mild).all() else OVERFLOW)
        _softmax_diagnosis(out, spread)

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
        own = rule("ex-03-stable-softmax")  # the same rule the grader reads from the source
        used = calls(softmax_fn, own.forbidden)
        if used:
            raise Hint(own.message.format(names=", ".join(used)))

    def input_unchanged():
        original = _random(3, 5, seed=1) + 2.0  # row maxima far from 0
        mine = original.clone()
        softmax_fn(mine)
        if not torch.equal(mine, original):
            raise Hint(CHANGED_INPUT)

    return [
        ("each row sums to 1 and matches torch.softmax", rows),
        ("no overflow for scores around 1000", huge),
        ("no overflow for scores far apart, [-3000, 0, 3000]", far_apart),
        ("no 0/0 for scores around -1000", very_negative),
        ("respects the dim argument", dim_argument),
        Guard("written without a ready-made softmax", from_scratch),
        Guard("leaves the scores unchanged", input_unchanged),
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
        if _is_zeros(out):
            raise Hint("every weight is 0: return softmax(queries @ keys.T / sqrt(d_k), dim=-1)")
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
        if close(out, scores / math.sqrt(d_k), atol=1e-5):
            raise Hint("no softmax: these are the scaled scores; turn them into weights with torch.softmax(..., dim=-1)")
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
        for guess in (2, 4, 64):
            if close(out, torch.softmax(q @ k.T / math.sqrt(guess), dim=-1), atol=1e-5):
                raise Hint(
                    f"with d_k=32 you divided by sqrt({guess}): read d_k from keys.shape[-1] inside "
                    "the function instead of using a fixed number or a global variable"
                )
        diagnose(out, q, k)

    def large_scores():
        q, k = _random(3, 16, seed=24, scale=40.0), _random(4, 16, seed=25, scale=40.0)
        out = _run(weights_fn, q, k)
        if not torch.isfinite(out).all():
            raise Hint(OVERFLOW)
        diagnose(out, q, k)

    return [
        Guard("(T_q, T_k) weights", shape),
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
            if close(out, torch.softmax(scores, dim=-1) / temperature, atol=1e-5):
                raise Hint(
                    "you divided the weights after the softmax, so the rows no longer sum to 1: "
                    "divide the scores before it, softmax(scores / temperature)"
                )
            _softmax_diagnosis(out, scores / temperature, dim=-1)

    def cold_limit():
        out = _run(softmax_fn, scores, 0.01)  # scores / 0.01 reach a few hundred: overflow risk
        if not torch.isfinite(out).all():
            raise Hint(OVERFLOW)
        if not close(out, torch.softmax(scores / 0.01, dim=-1), atol=1e-4):
            raise Hint("at temperature 0.01 the weights should be (nearly) one-hot on each row's largest score")

    def rejects(temperature: float, why: str):
        def test():
            try:
                softmax_fn(scores, temperature)
            except ValueError:
                return
            except Exception as err:  # AssertionError, ZeroDivisionError, ...
                raise Hint(
                    f"temperature={temperature} raised {type(err).__name__}; check the temperature "
                    "before dividing by it and raise a ValueError that says what is wrong"
                ) from None
            raise Hint(
                f"temperature={temperature} must raise ValueError ({why}): check that the "
                "temperature is positive before using it"
            )

        return test

    return [
        ("temperature 1 is the ordinary softmax", at_one),
        ("divides the scores by the temperature", hot_and_cold),
        ("stable at a low temperature", cold_limit),
        Guard("temperature=0 raises ValueError", rejects(0.0, "dividing by 0 gives inf and nan weights")),
        Guard("a negative temperature raises ValueError",
              rejects(-1.0, "a negative temperature silently turns the ranking upside down")),
    ]


# --------------------------------------------------------------------------------------------------
# ex-03-attend: choose W_query and W_key so that every token attends to one token
# --------------------------------------------------------------------------------------------------

ATTEND_TARGETS = (0, 4, 5)  # "Your", "one", "step": each reaches furthest in some direction


def _projections(fn, *args):
    """Call the answer and return two float tensors of shape (3, d_k), or raise a Hint."""
    out = fn(*args)
    if not isinstance(out, (tuple, list)) or len(out) != 2:
        raise Hint(f"return a pair (W_query, W_key), got {type(out).__name__}")
    W_query, W_key = out
    for name, matrix in (("W_query", W_query), ("W_key", W_key)):
        if not isinstance(matrix, torch.Tensor):
            raise Hint(f"{name} must be a torch.Tensor, got {type(matrix).__name__}")
        if matrix.ndim != 2 or matrix.shape[0] != 3:
            raise Hint(
                f"{name} has shape {tuple(matrix.shape)}; in this book a projection has shape "
                "(d_in, d_k) = (3, d_k) and is used as inputs @ W (not nn.Linear's (d_k, d_in))"
            )
    if W_query.shape != W_key.shape:
        raise Hint(
            f"W_query {tuple(W_query.shape)} and W_key {tuple(W_key.shape)} need the same d_k: "
            "queries and keys meet in a dot product"
        )
    return W_query.detach().float(), W_key.detach().float()


def _attention_weights(W_query, W_key) -> torch.Tensor:
    _, inputs = journey_inputs()
    scores = (inputs @ W_query) @ (inputs @ W_key).T  # (6, 6)
    return torch.softmax(scores / math.sqrt(W_key.shape[-1]), dim=-1)


def _attend_test(attending_projections, target: int):
    tokens, _ = journey_inputs()

    def test():
        for share in (0.9, 0.99):
            W_query, W_key = _projections(attending_projections, target, share)
            weights = _attention_weights(W_query, W_key)
            if not torch.isfinite(weights).all():
                raise Hint(
                    "the weights contain nan: your scores are so large that they overflow; a "
                    "factor of 100 or so is plenty, not 1e30"
                )
            on_target = weights[:, target]
            if bool((on_target >= share).all()):
                continue
            picks = weights.argmax(dim=-1)
            wrong = [i for i in range(len(tokens)) if int(picks[i]) != target]
            if wrong:
                names = ", ".join(f"'{tokens[i]}' -> '{tokens[int(picks[i])]}'" for i in wrong)
                raise Hint(
                    f"target {target} ('{tokens[target]}'): these queries attend to another key "
                    f"first: {names}. Every query must point the same way (a positive dot product "
                    "with one direction) and the target's key must reach further in that "
                    "direction than every other key"
                )
            raise Hint(
                f"target {target} ('{tokens[target]}'), share {share}: the ranking is right but "
                f"the weights are too soft (the smallest weight on the target is "
                f"{float(on_target.min()):.3f}). Softmax only sees the gaps between scores: "
                "multiply W_key (or W_query) by a larger number to widen them"
            )

    return test


@register("ex-03-attend", "Attend to one token")
def attend(attending_projections):
    """Check ``attending_projections(target, share)`` -> ``(W_query, W_key)`` of shape ``(3, d_k)``."""

    def shapes():
        _projections(attending_projections, 5, 0.9)

    def uses_target():
        first = _projections(attending_projections, 0, 0.9)
        second = _projections(attending_projections, 5, 0.9)
        if all(torch.equal(a, b) for a, b in zip(first, second)):
            raise Hint(
                "you return the same matrices for every target: the key projection must depend on "
                "`target` (each target needs its own direction)"
            )

    return [
        Guard("returns (W_query, W_key), each (3, d_k)", shapes),
        Guard("the matrices depend on the target", uses_target),
    ] + [
        (f"every token attends to '{journey_inputs()[0][t]}' (target {t})", _attend_test(attending_projections, t))
        for t in ATTEND_TARGETS
    ]


# --------------------------------------------------------------------------------------------------
# ex-03-soft-cap: cap * tanh(scores / cap)
# --------------------------------------------------------------------------------------------------


def _soft_cap_diagnosis(out: torch.Tensor, scores: torch.Tensor, cap: float) -> None:
    expected = cap * torch.tanh(scores / cap)
    if close(out, expected, atol=1e-4):
        return
    if out.shape != scores.shape:
        raise Hint(f"the capped scores must keep the shape {tuple(scores.shape)}, got {tuple(out.shape)}")
    if _is_zeros(out):
        raise Hint("every score is 0: return cap * torch.tanh(scores / cap)")
    mistakes = [
        (scores, "the scores came back unchanged: cap them with cap * torch.tanh(scores / cap)"),
        (cap * torch.tanh(scores), "divide the scores by the cap inside tanh: cap * tanh(scores / cap) "
                                   "(without it every score above about 3 is squashed to the cap)"),
        (torch.tanh(scores / cap), "multiply by the cap after tanh: tanh only reaches 1, the capped "
                                   "scores must reach almost cap"),
        (torch.clamp(scores, -cap, cap), "that is a hard clamp: soft-capping bends smoothly with tanh, "
                                         "so a score of 0.8 * cap already comes out smaller"),
        (scores / cap, "the tanh is missing: cap * torch.tanh(scores / cap)"),
        (cap * torch.tanh(scores * cap), "divide the scores by the cap, do not multiply them"),
        (torch.tanh(scores), "use the cap twice: cap * tanh(scores / cap)"),
    ]
    for wrong, hint in mistakes:
        if close(out, wrong, atol=1e-4):
            raise Hint(hint)
    raise Hint(f"with cap={cap} the result differs from cap * tanh(scores / cap)")


@register("ex-03-soft-cap", "Soft-capping the scores")
def soft_cap(cap_scores):
    """Check ``cap_scores(scores, cap)`` -> ``cap * tanh(scores / cap)``, ValueError for ``cap <= 0``."""
    scores = _random(3, 5, seed=50, scale=40.0)  # (3, 5): some far past a cap of 50, some below

    def gemma_cap():
        _soft_cap_diagnosis(_run(cap_scores, scores, 50.0), scores, 50.0)

    def small_cap():
        _soft_cap_diagnosis(_run(cap_scores, scores, 5.0), scores, 5.0)

    def any_shape():
        batch = _random(2, 3, 4, 4, seed=51, scale=20.0)  # (B, H, T, T)
        _soft_cap_diagnosis(_run(cap_scores, batch, 30.0), batch, 30.0)

    def rejects(cap: float):
        def test():
            try:
                cap_scores(scores.clone(), cap)
            except ValueError:
                return
            except Exception as err:
                raise Hint(f"cap={cap} raised {type(err).__name__}; raise a ValueError that says the cap "
                           "must be positive (check the argument before you divide by it)") from None
            raise Hint(f"cap={cap} must raise ValueError (a cap <= 0 gives nan or flips every score): "
                       "check the argument first and raise a ValueError that names it")
        return test

    def input_unchanged():
        mine = scores.clone()
        cap_scores(mine, 50.0)
        if not torch.equal(mine, scores):
            raise Hint("your function changed `scores` in place (e.g. `.tanh_()` or `/=`): compute a new "
                       "tensor, cap * torch.tanh(scores / cap)")

    return [
        ("Gemma 2's cap of 50", gemma_cap),
        ("a cap of 5", small_cap),
        ("a (B, H, T, T) batch", any_shape),
        Guard("cap=0 raises ValueError", rejects(0.0)),
        Guard("a negative cap raises ValueError", rejects(-50.0)),
        Guard("leaves the scores unchanged", input_unchanged),
    ]


# ---------------------------------------------------------------- ex-03-find-the-bug-axis
# Find the bug: `torch.softmax(scores, dim=1)` normalises the keys of 2-D scores (T_q, T_k) but
# the *queries* of a batch (B, T_q, T_k): its columns then sum to 1. The fix is dim=-1.

AXIS = (
    "softmax over the wrong axis: dim=1 is the keys' axis only for 2-D scores (T_q, T_k); in "
    "a batch (B, T_q, T_k) it is the queries', so each column sums to 1 instead of each row. "
    "Normalise over the last axis, the keys: dim=-1"
)


def _weights_reference(queries, keys):
    return torch.softmax(queries @ keys.transpose(-2, -1) / math.sqrt(keys.shape[-1]), dim=-1)


def _weights_diagnosis(out, queries, keys) -> str:
    scores = queries @ keys.transpose(-2, -1)
    d_k = keys.shape[-1]
    if out.shape != scores.shape:
        return (f"expected weights of shape {tuple(scores.shape)} (one row per query, one column "
                f"per key), got {tuple(out.shape)}")
    for dim in range(scores.ndim - 1):
        if close(out, torch.softmax(scores / math.sqrt(d_k), dim=dim)):
            return AXIS
    if close(out, torch.softmax(scores, dim=-1)):
        return "the scores are not scaled: divide them by sqrt(d_k) before the softmax"
    if close(out, torch.softmax(scores / d_k, dim=-1)):
        return "you divided by d_k; the scale is 1 / sqrt(d_k)"
    if close(out, torch.softmax(scores, dim=-1) / math.sqrt(d_k)):
        return "scale the scores before the softmax, not the weights after it"
    if not close(out.sum(dim=-1), torch.ones(out.shape[:-1])):
        return "each row (one query) must sum to 1: " + AXIS
    return "the weights differ from softmax(queries @ keys^T / sqrt(d_k)) over the keys"


@register("ex-03-find-the-bug-axis", "Find the bug: weights that do not add up")
def weights_axis(attention_weights):
    """Check the fixed ``attention_weights(queries, keys)`` -> ``(..., T_q, T_k)``."""

    def case(shape_q, shape_k, seed):
        queries, keys = _random(*shape_q, seed=seed), _random(*shape_k, seed=seed + 1)
        out = _run(attention_weights, queries, keys)
        if out.shape != (*shape_q[:-1], shape_k[-2]) or not close(out, _weights_reference(queries, keys)):
            raise Hint(_weights_diagnosis(out, queries, keys))

    def unchanged():
        queries, keys = _random(2, 3, 4, seed=9), _random(2, 5, 4, seed=10)
        q, k = queries.clone(), keys.clone()
        attention_weights(q, k)
        if not (torch.equal(q, queries) and torch.equal(k, keys)):
            raise Hint("your function changed its inputs in place; compute a new tensor instead")

    return [
        ("a batch (2, 4, 3) x (2, 5, 3): rows sum to 1", lambda: case((2, 4, 3), (2, 5, 3), 0)),
        ("a batch of heads (2, 3, 4, 8) x (2, 3, 4, 8)", lambda: case((2, 3, 4, 8), (2, 3, 4, 8), 2)),
        ("one sequence (6, 3) x (6, 3) as before", lambda: case((6, 3), (6, 3), 4)),
        Guard("leaves the inputs unchanged", unchanged),
    ]
