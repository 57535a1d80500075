"""Masks shared by the attention classes (chapters 5-10).

Every mask of the book is a boolean tensor that is ``True`` where an entry is **hidden**, the
convention of :func:`attention_book.functional.masked_softmax` and of
:class:`torch.nn.MultiheadAttention`'s masks (and the opposite of the boolean ``attn_mask`` of
:func:`torch.nn.functional.scaled_dot_product_attention`).
"""

from __future__ import annotations

from typing import Optional

import torch

from . import validation as check

__all__ = ["causal_mask", "padding_mask", "combine_masks", "check_context_length"]


def causal_mask(num_tokens: int, device=None) -> torch.Tensor:
    """Boolean ``(T, T)`` mask that is ``True`` where a query would see a *future* key.

    Row ``i`` is the query position, column ``j`` the key position; ``j > i`` is hidden. Use it
    with ``scores.masked_fill(causal_mask(T), float("-inf"))`` before the softmax, or pass it as
    ``mask`` to :func:`attention_book.functional.masked_softmax`.
    """
    check.positive_int("num_tokens", num_tokens)
    ones = torch.ones(num_tokens, num_tokens, dtype=torch.bool, device=device)
    return torch.triu(ones, diagonal=1)


def padding_mask(key_padding_mask: torch.Tensor, num_query_dims: int = 1) -> torch.Tensor:
    """A key padding mask ``(B, T_k)`` (``True`` = padding) reshaped to hide keys from every query.

    Returns ``(B, 1, T_k)`` (``num_query_dims=1``: one query axis, single-head weights
    ``(B, T_q, T_k)``) or ``(B, 1, 1, T_k)`` (``num_query_dims=2``: heads and queries, multi-head
    weights ``(B, H, T_q, T_k)``), so it broadcasts over the axes it does not know.
    """
    shape = key_padding_mask.shape[:-1] + (1,) * num_query_dims + key_padding_mask.shape[-1:]
    return key_padding_mask.reshape(shape)


def combine_masks(*masks: Optional[torch.Tensor]) -> Optional[torch.Tensor]:
    """Hide an entry if *any* mask hides it (``|``); ``None`` masks are skipped, all ``None`` -> ``None``.

    ``combine_masks(causal_mask(T), padding_mask(key_padding_mask))`` is the mask of a padded
    decoder batch: a key is hidden if it lies in the future **or** is padding.
    """
    combined = None
    for mask in masks:
        if mask is not None:
            combined = mask if combined is None else combined | mask
    return combined


def check_context_length(num_tokens: int, context_length: int, name: str = "the input") -> None:
    """Raise a clear ValueError when a sequence is longer than a module's ``context_length``."""
    check.sequence_length(name, num_tokens, context_length)
