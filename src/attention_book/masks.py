"""Masks shared by the attention classes (chapters 6 and 7)."""

from __future__ import annotations

import torch


def causal_mask(num_tokens: int, device=None) -> torch.Tensor:
    """Boolean ``(T, T)`` mask that is ``True`` where a query would see a *future* key.

    Row ``i`` is the query position, column ``j`` the key position; ``j > i`` is hidden. Use it
    with ``scores.masked_fill(causal_mask(T), float("-inf"))`` before the softmax.
    """
    if num_tokens < 1:
        raise ValueError(f"num_tokens must be at least 1, got {num_tokens}")
    ones = torch.ones(num_tokens, num_tokens, dtype=torch.bool, device=device)
    return torch.triu(ones, diagonal=1)


def check_context_length(num_tokens: int, context_length: int) -> None:
    """Raise a clear error when a sequence is longer than the mask buffer was built for."""
    if num_tokens > context_length:
        raise ValueError(
            f"the input has {num_tokens} tokens but this module was built with "
            f"context_length={context_length}; truncate the input to its last {context_length} "
            f"tokens or create the module with context_length >= {num_tokens}"
        )
