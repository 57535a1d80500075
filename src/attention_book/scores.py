"""Chapters 2 and 3: attention scores, softmax and the ``1/sqrt(d_k)`` scale.

The finished versions of the code the two chapters build step by step:

* :func:`attention_scores` - every query against every key, ``queries @ keys^T`` (chapter 2)
* :func:`additive_scores` - Bahdanau's additive scoring ``v . tanh(q W_q + k W_k)`` (chapter 2)
* :func:`sum_normalize` - dividing by the sum, the normalisation that breaks on negative scores
* :func:`naive_softmax` - ``exp / sum(exp)`` as written on paper; overflows for large scores
* :func:`stable_softmax` - the same function computed safely, with an optional temperature
* :func:`scaled_attention_weights` - ``softmax(queries @ keys^T / sqrt(d_k))`` (chapter 3)
* :func:`attention_entropy` - how spread out each row of attention weights is
* :func:`soft_cap` - ``cap * tanh(scores / cap)``: scores bounded to ``(-cap, cap)`` (chapter 3)

Everything follows the row-vector convention of the course: one token per row, so ``queries`` is
``(T_q, d_k)`` (or ``(..., T_q, d_k)`` with batch dimensions in front) and ``keys`` is
``(T_k, d_k)``. The result of a score function has one row per query and one column per key.
"""

from __future__ import annotations

import torch

from . import validation as check
from .functional import masked_softmax, scale_scores

__all__ = [
    "attention_scores",
    "additive_scores",
    "sum_normalize",
    "naive_softmax",
    "stable_softmax",
    "scaled_attention_weights",
    "attention_entropy",
    "soft_cap",
]


def _check_scores(scores, dim: int, name: str = "scores") -> None:
    check.floating_tensor(name, scores)
    check.dim_of(name, scores, dim)


def attention_scores(queries: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
    """Unnormalised attention scores ``omega``: the dot product of every query with every key.

    Args:
        queries: ``(T_q, d_k)`` - one query per row, or ``(d_k,)`` for a single query, or
            ``(..., T_q, d_k)`` with batch dimensions in front.
        keys: ``(T_k, d_k)`` or ``(..., T_k, d_k)``.

    Returns:
        ``(T_q, T_k)`` (or ``(T_k,)`` for a single query, ``(..., T_q, T_k)`` for batches) with
        ``omega[i, j] = queries[i] . keys[j]``: row ``i`` says how well query ``i`` matches each key.

    Raises:
        TypeError: an argument is not a floating-point tensor.
        ValueError: the queries and keys do not have the same last dimension ``d_k``.
    """
    check.floating_tensor("queries", queries, "(T_q, d_k)")
    check.floating_tensor("keys", keys, "(T_k, d_k)")
    if keys.ndim < 2:
        raise ValueError(
            f"keys must have one key per row, shape (T_k, d_k); got shape {tuple(keys.shape)}. "
            f"For a single key use keys.unsqueeze(0)"
        )
    if queries.ndim < 1 or queries.shape[-1] != keys.shape[-1]:
        raise ValueError(
            f"a query and a key must have the same length d_k to take their dot product, but "
            f"queries have shape {tuple(queries.shape)} (d_k={queries.shape[-1] if queries.ndim else None}) "
            f"and keys have shape {tuple(keys.shape)} (d_k={keys.shape[-1]}); project both with "
            f"weights of the same output width, e.g. W_query and W_key both (d_in, d_k)"
        )
    # (..., T_q, d_k) @ (..., d_k, T_k) -> (..., T_q, T_k); a 1-D query gives (T_k,)
    return queries @ keys.transpose(-2, -1)


def additive_scores(queries: torch.Tensor, keys: torch.Tensor, W_query: torch.Tensor,
                    W_key: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Additive (Bahdanau) attention scores: ``score[i, j] = v . tanh(queries[i] @ W_query + keys[j] @ W_key)``.

    A small network with one hidden layer of width ``d_h`` scores every pair, where the dot product
    multiplies. Queries and keys may have different widths. Every pair needs its own ``d_h`` hidden
    values, a ``(..., T_q, T_k, d_h)`` tensor, where the dot product needs one matrix product; and
    every score lies in ``[-sum|v|, sum|v|]`` because ``tanh`` is bounded.

    Args:
        queries: ``(T_q, d_q)`` or ``(..., T_q, d_q)``.
        keys: ``(T_k, d_k)`` or ``(..., T_k, d_k)``.
        W_query: ``(d_q, d_h)``; W_key: ``(d_k, d_h)``; v: ``(d_h,)``.

    Returns:
        ``(..., T_q, T_k)`` scores: row ``i`` belongs to query ``i``.
    """
    for name, value, shape in (("queries", queries, "(T_q, d_q)"), ("keys", keys, "(T_k, d_k)"),
                               ("W_query", W_query, "(d_q, d_h)"), ("W_key", W_key, "(d_k, d_h)"),
                               ("v", v, "(d_h,)")):
        check.floating_tensor(name, value, shape)
    check.ndim("W_query", W_query, 2, "(d_q, d_h)")
    check.ndim("W_key", W_key, 2, "(d_k, d_h)")
    check.ndim("v", v, 1, "(d_h,)")
    check.ndim("queries", queries, tuple(range(2, 9)), "(..., T_q, d_q)")
    check.ndim("keys", keys, tuple(range(2, 9)), "(..., T_k, d_k)")
    for name, value, weight_name, weight in (("queries", queries, "W_query", W_query),
                                             ("keys", keys, "W_key", W_key)):
        if value.shape[-1] != weight.shape[0]:
            raise ValueError(
                f"{name} of shape {tuple(value.shape)} have width {value.shape[-1]} but {weight_name} "
                f"{tuple(weight.shape)} expects {weight.shape[0]}: {name} @ {weight_name} needs "
                f"{weight_name}.shape[0] == {name}.shape[-1]"
            )
    if not (W_query.shape[1] == W_key.shape[1] == v.shape[0]):
        raise ValueError(
            f"W_query {tuple(W_query.shape)}, W_key {tuple(W_key.shape)} and v {tuple(v.shape)} must share "
            f"the hidden width d_h (W_query.shape[1] == W_key.shape[1] == v.shape[0]); build them with one d_h"
        )
    projected_queries = (queries @ W_query).unsqueeze(-2)  # (..., T_q, 1, d_h)
    projected_keys = (keys @ W_key).unsqueeze(-3)  # (..., 1, T_k, d_h)
    hidden = torch.tanh(projected_queries + projected_keys)  # (..., T_q, T_k, d_h): one per pair
    return hidden @ v  # (..., T_q, T_k)


def sum_normalize(scores: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Divide the scores by their sum along ``dim``.

    Only meaningful when every score is positive: a negative score becomes a negative "weight",
    and a sum near zero blows the weights up. Chapter 3 shows this and replaces it by softmax.
    """
    _check_scores(scores, dim)
    return scores / scores.sum(dim=dim, keepdim=True)


def naive_softmax(scores: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Softmax exactly as written on paper: ``exp(s) / sum(exp(s))`` along ``dim``.

    Correct for small scores, but ``exp`` overflows to ``inf`` in float32 once a score exceeds
    about 88.7, and ``inf / inf`` is ``nan``. Use :func:`stable_softmax` in real code.
    """
    _check_scores(scores, dim)
    exponentials = torch.exp(scores)
    return exponentials / exponentials.sum(dim=dim, keepdim=True)


def stable_softmax(scores: torch.Tensor, dim: int = -1, temperature: float = 1.0) -> torch.Tensor:
    """Numerically stable softmax of ``scores / temperature`` along ``dim``.

    Subtracting each row's maximum before ``exp`` changes nothing mathematically (softmax ignores
    a constant added to every score) but keeps every exponent ``<= 0``, so nothing overflows.

    Args:
        scores: any floating-point tensor; ``-inf`` entries get weight 0 (masking, chapter 7).
        dim: the dimension that sums to 1; ``-1`` (default) normalises each row.
        temperature: ``> 0``. Below 1 sharpens the weights towards the largest score, above 1
            flattens them towards uniform. Dividing by ``sqrt(d_k)`` is a temperature of ``sqrt(d_k)``.

    Returns:
        A tensor of the same shape whose slices along ``dim`` are non-negative and sum to 1.
        A slice whose scores are all ``-inf`` has nothing to attend to: it comes out as zeros,
        with zero gradients, the rule of :func:`attention_book.functional.masked_softmax` for a
        fully masked row (:func:`torch.softmax` would give ``nan``). ``tests/test_scores.py``
        checks that this function equals ``masked_softmax(scores / temperature, scores == -inf)``.

    Raises:
        TypeError: ``scores`` is not a floating-point tensor, ``temperature`` not a number.
        ValueError: ``temperature <= 0`` or ``dim`` out of range.
    """
    _check_scores(scores, dim)
    temperature = check.positive_number("temperature", temperature)  # e.g. 0.1 sharp, 10 flat
    scaled = scores / temperature
    row_max = scaled.amax(dim=dim, keepdim=True)
    # An all -inf slice has max -inf; shifting by 0 there avoids (-inf) - (-inf) = nan in the exponent.
    row_max = torch.where(torch.isfinite(row_max), row_max, torch.zeros_like(row_max)).detach()
    exponentials = torch.exp(scaled - row_max)  # every exponent <= 0: values in [0, 1]
    total = exponentials.sum(dim=dim, keepdim=True)  # >= 1 unless the slice is all -inf (then 0)
    # An all -inf slice: 0 / 1 = 0 instead of 0 / 0 = nan (the core's rule for fully masked rows).
    return exponentials / torch.where(total > 0, total, torch.ones_like(total))


def scaled_attention_weights(queries: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
    """Attention weights of scaled dot-product attention: ``softmax(Q K^T / sqrt(d_k))`` by rows.

    ``d_k`` is read from ``keys.shape[-1]``, so the function works for any projection width.

    Args:
        queries: ``(T_q, d_k)``, ``(d_k,)`` or ``(..., T_q, d_k)``.
        keys: ``(T_k, d_k)`` or ``(..., T_k, d_k)``.

    Returns:
        ``(T_q, T_k)`` weights (``(T_k,)`` for a single query); every row is non-negative and sums to 1.
    """
    scores = attention_scores(queries, keys)  # (..., T_q, T_k); checks the shapes
    return masked_softmax(scale_scores(scores, d_k=keys.shape[-1]))  # the core's scale and softmax


def attention_entropy(weights: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Entropy (in nats) of each distribution of attention weights along ``dim``.

    ``0`` means all weight on one key (saturated); ``log(T_k)`` means uniform weights.
    Zero weights (masked keys) contribute nothing (``0 * log 0`` is taken as 0), in the value
    *and* in the gradient: the logarithm is taken of 1 where a weight is 0, so no
    ``0 * log(0) = 0 * (-inf) = nan`` reaches the gradient of masked scores (a ``torch.where``
    after the product, or ``torch.xlogy(w, w)``, still sends NaN backwards).
    """
    _check_scores(weights, dim, name="weights")
    if (weights < 0).any():
        raise ValueError("weights must be non-negative (attention weights); pass the output of a softmax")
    safe = torch.where(weights > 0, weights, torch.ones_like(weights))  # log(1) = 0 where w = 0
    return -(weights * torch.log(safe)).sum(dim=dim)  # -sum w log w


def soft_cap(scores: torch.Tensor, cap: float) -> torch.Tensor:
    """Logit soft-capping: ``cap * tanh(scores / cap)``, every score squeezed into ``(-cap, cap)``.

    Scores much smaller than ``cap`` pass almost unchanged (``tanh(x) ~ x`` near 0), large ones
    level off just below ``cap``; unlike a hard clamp it is smooth. Gemma 2 caps its attention
    scores at 50.0 (and its output logits at 30.0). Returns a new tensor; ``scores`` is unchanged.

    Raises:
        TypeError: ``scores`` is not a floating-point tensor, ``cap`` not a number.
        ValueError: ``cap`` is not a finite number > 0.
    """
    check.floating_tensor("scores", scores)
    cap = check.positive_number("cap", cap)  # e.g. 50.0
    return cap * torch.tanh(scores / cap)
