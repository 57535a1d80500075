"""The attention core: the few lines every attention module of the book runs.

Chapters 2-4 write scaled dot-product attention out step by step; from then on every class of
the package (``SelfAttention``, ``MultiHeadAttention``, ``CrossAttention``, ``CausalAttention``,
the chapter 8 model and the chapter 10 modules) calls the two functions below, so there is one
place where the scale, the mask and the softmax are computed::

    scores  = query @ key^T / sqrt(d_k)               # (..., T_q, T_k); or * scale if given
    weights = masked_softmax(scores, mask)            # rows sum to 1 over the visible keys
    weights = dropout(weights)                        # training only
    context = weights @ value                         # (..., T_q, d_v)

**Mask convention (the book's):** ``mask`` is a boolean tensor, ``True`` = *hidden*, broadcastable
to the scores, e.g. :func:`attention_book.masks.causal_mask` (``True`` above the diagonal) or a
key padding mask ``(B, T_k)`` reshaped to ``(B, 1, T_k)``. This is the convention of
``torch.nn.MultiheadAttention``'s masks and the *opposite* of the boolean ``attn_mask`` of
:func:`torch.nn.functional.scaled_dot_product_attention` (there ``True`` = may attend): pass
``~mask`` to that function.

**The rule for fully masked rows:** a query whose keys are *all* hidden (left padding under a
causal mask, an all-padding context) has nothing to attend to. Its weights are **all zeros** and
so is its context vector (``0 @ value``), in the forward pass; in the backward pass every
gradient through that row is **zero** (finite). Nothing is ever NaN: the row's scores are
replaced by zeros *before* the softmax (so no ``exp(-inf) / 0``) and its weights are zeroed
afterwards (so no gradient reaches the scores). A plain ``softmax`` of a row of ``-inf`` gives
``0 / 0 = NaN``, which spreads to the loss and every gradient; ``-1e9`` instead of ``-inf`` gives
uniform weights instead of zeros. Rows with at least one visible key are exactly
``torch.softmax`` over the visible keys. Scores you set to ``-inf`` yourself are not "hidden":
without a mask, ``masked_softmax`` *is* ``torch.softmax`` (pass the mask instead).
"""

from __future__ import annotations

import math
from typing import Callable, Optional, Tuple

import torch

from . import validation as check

__all__ = ["masked_softmax", "scale_scores", "scaled_dot_product_attention"]


def _mask_for(name: str, mask, scores_shape) -> Optional[torch.Tensor]:
    return check.optional(check.bool_mask, name, mask, scores_shape)


def masked_softmax(scores: torch.Tensor, mask: Optional[torch.Tensor] = None, dim: int = -1) -> torch.Tensor:
    """Softmax of ``scores`` along ``dim`` in which the entries where ``mask`` is True get weight 0.

    Args:
        scores: a floating-point tensor of any shape (any float dtype, fp16 and bf16 included).
        mask: ``None`` or a bool tensor broadcastable to ``scores``, ``True`` = hidden. It is moved
            to the device of ``scores`` if needed (masks are small; the result stays where the
            scores are).
        dim: the dimension that sums to 1 (``-1``: one distribution per row).

    Returns:
        A tensor of the shape and dtype of ``scores``. Along ``dim`` every slice with a visible
        entry sums to 1 with zeros at the hidden entries; a slice whose entries are all hidden is
        all zeros, with zero (never NaN) gradients (see the module docstring).
    """
    check.floating_tensor("scores", scores)
    check.dim_of("scores", scores, dim)
    mask = _mask_for("mask", mask, scores.shape)
    if mask is None:
        return torch.softmax(scores, dim=dim)
    hidden = mask.to(scores.device)
    all_hidden = hidden.all(dim=dim, keepdim=True)  # the rows with nothing to attend to
    # A fully hidden row keeps finite scores (0) for the softmax, so no exp(-inf) / 0 ...
    scores = scores.masked_fill(hidden, float("-inf")).masked_fill(all_hidden, 0.0)
    weights = torch.softmax(scores, dim=dim)
    # ... and is zeroed afterwards, which also stops every gradient through it.
    return weights.masked_fill(all_hidden, 0.0)


def scale_scores(scores: torch.Tensor, d_k: int, scale: Optional[float] = None) -> torch.Tensor:
    """``scores / sqrt(d_k)`` (the book's scale, chapter 3), or ``scores * scale`` if ``scale`` is given.

    The one place the package spells the scale; ``d_k`` is the size of the keys, read from the
    tensors by the callers (``key.shape[-1]``), never from a global variable.
    """
    if scale is None:
        return scores / math.sqrt(check.positive_int("d_k", d_k))
    return scores * check.positive_number("scale", scale)


def scaled_dot_product_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    mask: Optional[torch.Tensor] = None,
    dropout: Optional[Callable[[torch.Tensor], torch.Tensor]] = None,
    scale: Optional[float] = None,
) -> Tuple[torch.Tensor, torch.Tensor]:
    """Scaled dot-product attention: ``(context, weights)`` for already projected inputs.

    Args:
        query: ``(..., T_q, d_k)``.
        key: ``(..., T_k, d_k)``.
        value: ``(..., T_k, d_v)``. The leading (batch, head) dimensions of the three broadcast.
        mask: ``None`` or a bool tensor broadcastable to the weights ``(..., T_q, T_k)``,
            ``True`` = hidden (see the module docstring for fully hidden rows).
        dropout: ``None`` or a callable applied to the weights, typically the module's
            ``nn.Dropout`` (active in ``.train()`` mode only).
        scale: multiplies the scores; default ``1 / sqrt(d_k)`` with ``d_k = key.shape[-1]``.

    Returns:
        ``context`` ``(..., T_q, d_v)`` and ``weights`` ``(..., T_q, T_k)`` (after dropout: the
        weights actually used), in the dtype of the inputs. For float16 and bfloat16 inputs the
        scores and the softmax are computed in float32 (a dot product of two half-precision
        vectors overflows above 65504), then the weights are cast back.
    """
    check.floating_tensor("query", query, "(..., T_q, d_k)")
    check.floating_tensor("key", key, "(..., T_k, d_k)")
    check.floating_tensor("value", value, "(..., T_k, d_v)")
    for name, tensor, shape in (("query", query, "(..., T_q, d_k)"), ("key", key, "(..., T_k, d_k)"),
                                ("value", value, "(..., T_k, d_v)")):
        if tensor.ndim < 2:
            raise ValueError(
                f"{name} must have shape {shape} (one vector per row), got shape {tuple(tensor.shape)}; "
                f"add a token dimension with {name}.unsqueeze(0)"
            )
    for name, tensor in (("key", key), ("value", value)):
        check.same_dtype(name, tensor, "query", query)
        check.same_device(name, tensor, "query", query)
    if query.shape[-1] != key.shape[-1]:
        raise ValueError(
            f"query has size {query.shape[-1]} but key has size {key.shape[-1]} in the last dimension; "
            "a dot product needs equal sizes: project queries and keys to the same d_k"
        )
    if key.shape[-2] != value.shape[-2]:
        raise ValueError(
            f"key has {key.shape[-2]} tokens but value has {value.shape[-2]}: every key needs exactly "
            "one value, so compute both from the same sequence"
        )
    batch = check.dims_broadcast(("query", "key", "value"),
                                 (query.shape[:-2], key.shape[:-2], value.shape[:-2]),
                                 "leading dimensions")
    weights_shape = batch + (query.shape[-2], key.shape[-2])
    mask = _mask_for("mask", mask, weights_shape)
    if dropout is not None and not callable(dropout):
        raise TypeError(
            f"dropout must be None or a callable such as nn.Dropout(p), got {dropout!r} "
            f"({type(dropout).__name__}); build self.dropout = nn.Dropout(p) and pass it"
        )
    check.optional(check.positive_number, "scale", scale)

    if query.element_size() < 4:  # fp16 / bf16: a dot product of large vectors can overflow
        query, key = query.float(), key.float()
    scores = query @ key.transpose(-2, -1)  # (..., T_q, d_k) @ (..., d_k, T_k) -> (..., T_q, T_k)
    scores = scale_scores(scores, key.shape[-1], scale)  # / sqrt(d_k)
    weights = masked_softmax(scores, mask).to(value.dtype)  # rows sum to 1 (or are 0: nothing visible)
    if dropout is not None:
        weights = dropout(weights)  # training only; survivors scaled by 1 / (1 - p)
    return weights @ value, weights  # (..., T_q, T_k) @ (..., T_k, d_v) -> (..., T_q, d_v)
