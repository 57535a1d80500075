"""Self-checks of chapter 4 (context vectors, a compact self-attention class).

``from attention_book.checks import ch04`` then ``ch04.context_vectors(fn)`` or
``ch04.copy_weights(fn)``.
"""

from __future__ import annotations

import math

import torch

from .core import Hint, close, register

__all__ = ["context_vectors", "copy_weights"]

WRONG_DIM = (
    "wrong softmax dim: your weights sum to 1 down each column, but each query's row must; "
    "use torch.softmax(scores, dim=-1)"
)
MISSING_SCALE = (
    "missing scale: divide the scores by sqrt(d_k) before the softmax, "
    "scores / keys.shape[-1] ** 0.5"
)
NO_SQRT = "you divided the scores by d_k; the scale is its square root: scores / keys.shape[-1] ** 0.5"
D_V_SCALE = (
    "you scaled by sqrt(d_v) = sqrt(values.shape[-1]); d_k is the size of queries and keys: "
    "keys.shape[-1]"
)
TRANSPOSED_SCORES = (
    "transposed product: the scores are queries @ keys.transpose(-2, -1) (row i = query i), "
    "not keys @ queries.transpose(-2, -1)"
)
TRANSPOSED_WEIGHTS = (
    "transposed product: the context vectors are weights @ values, where row i of the weights "
    "belongs to query i; you multiplied the transposed weights"
)
BATCH_T = (
    "on a batch (B, T, d) use keys.transpose(-2, -1) (or keys.mT) instead of keys.T: "
    ".T reverses all three dimensions of a 3-D tensor"
)
NOT_TRANSPOSED = (
    "weights not transposed: nn.Linear stores its weight as (d_out, d_in) and computes "
    "x @ weight.T, so copy the transpose, linear.weight.copy_(W.T)"
)
NO_GRAD = (
    "PyTorch refuses in-place changes of trainable parameters while it records gradients: "
    "do the copies inside `with torch.no_grad():`"
)
ASSIGN_TENSOR = (
    "a module's parameter can only be replaced by an nn.Parameter; copy the numbers into the "
    "existing one instead: `with torch.no_grad(): linear.weight.copy_(W.T)`"
)
SHARED = (
    "the two modules share memory: changing the nn.Parameter version later also changed the "
    "nn.Linear version. Copy the numbers with .copy_(...) (or use .clone()) instead of reusing the tensor"
)


def _random(*shape, seed: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=generator)


def _reference(queries, keys, values, dim: int = -1, scale_by: float = None):
    d_k = keys.shape[-1] if scale_by is None else scale_by
    scores = queries @ keys.transpose(-2, -1)
    return torch.softmax(scores / math.sqrt(d_k), dim=dim) @ values


def _diagnose(out: torch.Tensor, queries, keys, values) -> None:
    """Raise the most specific hint for wrong context vectors ``out``; return if they are right."""
    d_k, d_v = keys.shape[-1], values.shape[-1]
    expected = _reference(queries, keys, values)
    if out.shape != expected.shape:
        raise Hint(
            f"expected context vectors of shape {tuple(expected.shape)} (one row of size d_v = {d_v} "
            f"per query), got {tuple(out.shape)}; multiply the (T, T) weights by the values"
        )
    if close(out, expected, atol=1e-5):
        return
    scores = queries @ keys.transpose(-2, -1)
    weights = torch.softmax(scores / math.sqrt(d_k), dim=-1)
    if close(out, _reference(queries, keys, values, dim=-2), atol=1e-5):
        raise Hint(WRONG_DIM)
    if close(out, torch.softmax(scores.transpose(-2, -1) / math.sqrt(d_k), dim=-1) @ values, atol=1e-5):
        raise Hint(TRANSPOSED_SCORES)
    if close(out, weights.transpose(-2, -1) @ values, atol=1e-5):
        raise Hint(TRANSPOSED_WEIGHTS)
    if close(out, torch.softmax(scores, dim=-1) @ values, atol=1e-5):
        raise Hint(MISSING_SCALE)
    if close(out, _reference(queries, keys, values, scale_by=d_k**2), atol=1e-5):
        raise Hint(NO_SQRT)
    if close(out, _reference(queries, keys, values, scale_by=d_v), atol=1e-5):
        raise Hint(D_V_SCALE)
    for guess in range(2, 17):
        if close(out, _reference(queries, keys, values, scale_by=guess), atol=1e-5):
            raise Hint(
                f"you divided by sqrt({guess}), but here d_k = keys.shape[-1] = {d_k}; read d_k from "
                "keys.shape[-1] inside the function instead of using a variable defined outside it"
            )
    if close(out, scores @ values, atol=1e-5) or close(out, (scores / math.sqrt(d_k)) @ values, atol=1e-5):
        raise Hint("no softmax: turn the scores into weights with torch.softmax(..., dim=-1) first")
    raise Hint("the context vectors differ from softmax(queries @ keys^T / sqrt(d_k)) @ values")


@register("ex-04-context-vectors", "Context vectors from queries, keys and values")
def context_vectors(context_fn):
    """Check ``context_fn(queries, keys, values)`` -> ``softmax(Q K^T / sqrt(d_k), dim=-1) @ V``."""
    # d_k = 3 and d_v = 4 differ, so every wrong scale gives a different answer.
    queries, keys, values = _random(5, 3, seed=40), _random(5, 3, seed=41), _random(5, 4, seed=42)

    def call(q, k, v):
        out = context_fn(q, k, v)
        if isinstance(out, tuple):
            raise Hint("return only the context vectors (one tensor), not a tuple")
        if not isinstance(out, torch.Tensor):
            raise Hint(f"return a torch.Tensor, got {type(out).__name__}")
        return out.detach()

    def one_sequence():
        _diagnose(call(queries, keys, values), queries, keys, values)

    def journey_row():
        # chapter 4's numbers: query x^(2) of "Your journey starts with one step"
        q, k, v = _journey_projections()
        _diagnose(call(q, k, v), q, k, v)

    def batch():
        q, k, v = _random(2, 4, 3, seed=43), _random(2, 4, 3, seed=44), _random(2, 4, 4, seed=45)
        try:
            out = call(q, k, v)
        except RuntimeError as err:
            raise Hint(f"{BATCH_T} (PyTorch said: {str(err).splitlines()[0]})") from None
        try:
            _diagnose(out, q, k, v)
        except Hint:
            one = call(q[0], k[0], v[0])
            if close(one, _reference(q[0], k[0], v[0]), atol=1e-5):
                raise Hint(f"right for one sequence but not for a batch: {BATCH_T}") from None
            raise

    return [
        ("one sequence: d_k = 3, d_v = 4", one_sequence),
        ("reproduces z^(2) = [0.2854, 0.4081] for the journey inputs", journey_row),
        ("a batch of shape (B, T, d)", batch),
    ]


def _journey_projections():
    """Queries, keys and values of chapter 4's running example (seed 123, nn.Parameter version)."""
    from ..attention import SelfAttentionParams
    from ..data import journey_inputs

    _, inputs = journey_inputs()
    state = torch.random.get_rng_state()
    try:
        torch.manual_seed(123)
        module = SelfAttentionParams(3, 2)
    finally:
        torch.random.set_rng_state(state)
    with torch.no_grad():
        return module.project(inputs)


def _pair(d_in: int, d_out_kq: int, d_out_v: int, seed: int):
    from ..attention import SelfAttention, SelfAttentionParams

    state = torch.random.get_rng_state()
    try:
        torch.manual_seed(seed)
        source = SelfAttentionParams(d_in, d_out_kq, d_out_v)
        target = SelfAttention(d_in, d_out_kq, d_out_v)
    finally:
        torch.random.set_rng_state(state)
    return source, target


def _run_copy(copy_fn, source, target) -> None:
    try:
        copy_fn(source, target)
    except RuntimeError as err:
        message = str(err)
        if "leaf Variable that requires grad" in message or "requires grad is being used" in message:
            raise Hint(NO_GRAD) from None
        if "size" in message or "shape" in message:
            raise Hint(f"{NOT_TRANSPOSED} (PyTorch said: {message.splitlines()[0]})") from None
        raise
    except TypeError as err:
        if "cannot assign" in str(err):
            raise Hint(ASSIGN_TENSOR) from None
        raise


def _diagnose_copy(source, target, inputs) -> None:
    from torch import nn

    names = ("query", "key", "value")
    for name in names:
        weight = getattr(target, f"W_{name}").weight
        if not isinstance(weight, nn.Parameter):
            raise Hint(ASSIGN_TENSOR)
    for name in names:
        matrix = getattr(source, f"W_{name}").detach()  # (d_in, d_out)
        weight = getattr(target, f"W_{name}").weight.detach()  # should be (d_out, d_in)
        if close(weight, matrix.T):
            continue
        if weight.shape == matrix.shape and close(weight, matrix):
            raise Hint(NOT_TRANSPOSED + f" (W_{name} was copied as it is)")
        for other in names:
            if other != name and close(weight, getattr(source, f"W_{other}").detach().T):
                raise Hint(f"W_{name} of the nn.Linear version holds W_{other}: copy each matrix into its namesake")
        raise Hint(f"W_{name}.weight does not hold W_{name}.T: copy all three matrices (query, key, value)")
    with torch.no_grad():
        expected, got = source(inputs), target(inputs)
    if not close(got, expected, atol=1e-5):
        raise Hint("the weights were copied but the outputs differ; did you change anything else?")


@register("ex-04-copy-weights", "Copy nn.Parameter weights into nn.Linear layers")
def copy_weights(copy_fn):
    """Check ``copy_fn(params_version, linear_version)``: afterwards both give the same outputs."""
    from torch import nn

    def rectangular():
        source, target = _pair(3, 2, 4, seed=0)
        _run_copy(copy_fn, source, target)
        _diagnose_copy(source, target, _random(6, 3, seed=46))

    def square():
        # d_in == d_out: a copy without transposing raises no shape error here, only wrong numbers
        source, target = _pair(3, 3, 3, seed=1)
        _run_copy(copy_fn, source, target)
        _diagnose_copy(source, target, _random(2, 5, 3, seed=47))

    def trainable():
        source, target = _pair(4, 2, 2, seed=2)
        _run_copy(copy_fn, source, target)
        for name in ("query", "key", "value"):
            weight = getattr(target, f"W_{name}").weight
            if not isinstance(weight, nn.Parameter) or not weight.requires_grad:
                raise Hint(f"W_{name}.weight must stay a trainable nn.Parameter; {ASSIGN_TENSOR}")

    def independent():
        source, target = _pair(3, 2, 2, seed=3)
        _run_copy(copy_fn, source, target)
        before = target.W_query.weight.detach().clone()
        with torch.no_grad():
            source.W_query.add_(1.0)
        if not torch.equal(target.W_query.weight.detach(), before):
            raise Hint(SHARED)

    return [
        ("same outputs for d_in=3, d_k=2, d_v=4", rectangular),
        ("same outputs for square matrices (d_in = d_out = 3) on a batch", square),
        ("the nn.Linear weights stay trainable parameters", trainable),
        ("the two modules do not share memory afterwards", independent),
    ]
