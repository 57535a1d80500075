"""Self-checks of chapter 4 (context vectors, a compact self-attention class).

``from attention_book.checks import ch04`` then ``ch04.context_vectors(fn)`` or
``ch04.copy_weights(fn)``.
"""

from __future__ import annotations

import math

import torch

from .core import Guard, Hint, close, register

__all__ = ["context_vectors", "copy_weights", "permutation"]

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
    if bool((out == 0).all()):
        raise Hint("every entry is 0: return softmax(queries @ keys^T / sqrt(d_k), dim=-1) @ values")
    if close(out, values, atol=1e-6):
        raise Hint("you returned the values unchanged: mix them with the attention weights, weights @ values")
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


@register("ex-04-context-vectors", "Context vectors in one function")
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
        if name == "query" and not any(
            close(getattr(target, f"W_{other}").weight.detach(), getattr(source, f"W_{other}").detach().T)
            for other in names
        ):
            raise Hint(
                "nothing was copied: the nn.Linear weights are still their random start values; "
                "copy each W.T into the layer's .weight inside `with torch.no_grad():`"
            )
        raise Hint(f"W_{name}.weight does not hold W_{name}.T: copy all three matrices (query, key, value)")
    with torch.no_grad():
        expected, got = source(inputs), target(inputs)
    if not close(got, expected, atol=1e-5):
        raise Hint("the weights were copied but the outputs differ; did you change anything else?")


@register("ex-04-copy-weights", "Same weights, same outputs")
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
        Guard("the nn.Linear weights stay trainable parameters", trainable),
        Guard("the two modules do not share memory afterwards", independent),
    ]


# --------------------------------------------------------------------------------------------------
# ex-04-permutation: is a module permutation-equivariant?
# --------------------------------------------------------------------------------------------------

EXACT = (
    "you compared with torch.equal or ==: summing in another order changes the last float bit "
    "(here SA(x[p]) and SA(x)[p] differ by about 1e-7), so compare with torch.allclose"
)


class _WithPositions(torch.nn.Module):
    """Self-attention after adding a learned position vector to each row: not equivariant."""

    def __init__(self, attention: torch.nn.Module, num_positions: int, d_in: int, seed: int):
        super().__init__()
        self.attention = attention
        generator = torch.Generator().manual_seed(seed)
        self.positions = torch.nn.Parameter(torch.randn(num_positions, d_in, generator=generator))

    def forward(self, x):
        return self.attention(x + self.positions[: x.shape[0]])


class _RunningMean(torch.nn.Module):
    """Each token becomes the mean of itself and the tokens before it: causal, not equivariant."""

    def forward(self, x):
        counts = torch.arange(1, x.shape[0] + 1, dtype=x.dtype).unsqueeze(-1)
        return x.cumsum(dim=0) / counts


def _attention(d_in: int, d_out: int, seed: int) -> torch.nn.Module:
    from ..attention import SelfAttention

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return SelfAttention(d_in, d_out, d_out).eval()


def _permutation(length: int, seed: int) -> torch.Tensor:
    """A permutation that is not its own inverse (so p and argsort(p) differ)."""
    generator = torch.Generator().manual_seed(seed)
    while True:
        p = torch.randperm(length, generator=generator)
        if not torch.equal(p[p], torch.arange(length)):
            return p


def _verdict(is_equivariant, module, x, p) -> bool:
    result = is_equivariant(module, x.clone(), p.clone())
    if isinstance(result, torch.Tensor):
        if result.numel() != 1:
            raise Hint(
                f"return one True or False, not a tensor of shape {tuple(result.shape)}: reduce "
                "the comparison, e.g. torch.allclose(a, b, atol=1e-5)"
            )
        result = bool(result)
    if not isinstance(result, bool):
        raise Hint(f"return True or False, got {type(result).__name__}")
    return result


def _expect(is_equivariant, module, x, p, expected: bool, what: str) -> None:
    got = _verdict(is_equivariant, module, x, p)
    if got == expected:
        return
    with torch.no_grad():
        first, after = module(x[p]), module(x)[p]
        inverse = module(x)[torch.argsort(p)]
    if expected and torch.allclose(first, after, atol=1e-5) and not torch.equal(first, after):
        raise Hint(EXACT)
    if expected:
        raise Hint(
            f"{what} is permutation-equivariant but your function says False: compare "
            "module(x[permutation]) with module(x)[permutation] (shuffle the outputs the same "
            "way as the inputs), not with module(x) itself or with the inverse permutation"
        )
    if torch.allclose(first, inverse, atol=1e-5):
        raise Hint(
            f"{what} is not permutation-equivariant but your function says True; check that you "
            "shuffle the outputs with the same permutation as the inputs"
        )
    raise Hint(
        f"{what} is not permutation-equivariant but your function says True: compare the two "
        "results, module(x[permutation]) and module(x)[permutation], instead of assuming"
    )


@register("ex-04-permutation", "Check permutation equivariance")
def permutation(is_equivariant):
    """Check ``is_equivariant(module, x, permutation)`` -> ``bool``: does module(x[p]) equal module(x)[p]?"""
    generator = torch.Generator().manual_seed(60)
    x = torch.randn(7, 4, generator=generator)  # (T, d_in)
    p = _permutation(7, seed=61)

    def attention_and_positions():
        attention = _attention(4, 3, seed=62)
        _expect(is_equivariant, attention, x, p, True, "self-attention")
        _expect(is_equivariant, _WithPositions(attention, 7, 4, seed=63), x, p, False,
                "self-attention with position embeddings")

    def per_token_and_causal():
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(64)
            per_token = torch.nn.Linear(4, 5)
        _expect(is_equivariant, per_token, x, p, True, "a per-token nn.Linear")
        _expect(is_equivariant, _RunningMean(), x, p, False, "a running mean over the tokens")

    def other_sizes():
        y = torch.randn(12, 6, generator=torch.Generator().manual_seed(65))
        q = _permutation(12, seed=66)
        _expect(is_equivariant, _attention(6, 8, seed=67), y, q, True, "self-attention on 12 tokens")
        _expect(is_equivariant, _WithPositions(_attention(6, 8, seed=67), 12, 6, seed=68), y, q, False,
                "self-attention with position embeddings on 12 tokens")

    def input_unchanged():
        mine, order = x.clone(), p.clone()
        is_equivariant(_attention(4, 3, seed=62), mine, order)
        if not torch.equal(mine, x) or not torch.equal(order, p):
            raise Hint(
                "your function changed x (or the permutation) in place, e.g. x[:] = x[permutation]: "
                "index into a new tensor instead, x[permutation]"
            )

    return [
        ("self-attention: True; with position embeddings: False", attention_and_positions),
        ("per-token layer: True; running mean: False", per_token_and_causal),
        ("other sizes and another permutation", other_sizes),
        Guard("x and the permutation are left unchanged", input_unchanged),
    ]
