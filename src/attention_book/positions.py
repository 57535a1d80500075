"""Rotary position embeddings (RoPE) and the positions they need (chapter 10).

Chapter 1 *added* a learned vector per position to every token embedding. RoPE (Su et al.,
2021, "RoFormer") instead *rotates* the queries and keys: their ``head_dim`` numbers are read as
``head_dim / 2`` pairs, and pair ``i`` of the vector at position ``m`` is turned by the angle
``m * theta_i`` with ``theta_i = base ** (-2 i / head_dim)`` (fast turns for the first pairs,
slow ones for the last). A rotation keeps lengths, and the dot product of two vectors turned by
``m * theta`` and ``n * theta`` depends only on ``(m - n) * theta``: the scores see how far apart
two tokens are, not where they are. Values are not rotated.

* :func:`rope_frequencies` - the ``head_dim / 2`` angles per position step, ``theta_i``;
* :func:`apply_rope` - rotate ``(..., T, head_dim)`` queries or keys by their positions;
* :func:`positions_from_padding` - position ids that skip left padding, ``(B, T)``;
* :func:`next_positions` - where the tokens after a cached prefix sit.

Positions are whatever you pass: ``0 .. T - 1`` for one sequence, per-sequence ids for a padded
batch (padding takes no position: the first real token is at 0), and ``len(cache) + i`` for the
``i``-th new token after a KV cache (:class:`attention_book.gqa.GroupedQueryAttention` does this).
"""

from __future__ import annotations

import torch

from . import validation as check

__all__ = ["rope_frequencies", "apply_rope", "positions_from_padding", "next_positions"]

#: the base of RoPE's angles in the RoFormer paper and most models since (Llama 3 uses 500,000)
ROPE_BASE = 10_000.0


def _even_head_dim(head_dim: int) -> int:
    check.positive_int("head_dim", head_dim)
    if head_dim % 2:
        raise ValueError(
            f"head_dim={head_dim} is odd: RoPE turns the numbers of a head in pairs, so head_dim "
            f"must be even (e.g. {head_dim - 1 or 2} or {head_dim + 1})"
        )
    return head_dim


def rope_frequencies(head_dim: int, base: float = ROPE_BASE,
                     device=None) -> torch.Tensor:
    """The angle per position step of each of the ``head_dim / 2`` pairs, ``(head_dim / 2,)``
    float32: ``theta_i = base ** (-2 i / head_dim)``, from 1 (pair 0) down to about ``1 / base``."""
    _even_head_dim(head_dim)
    base = check.positive_number("base", base)
    exponents = torch.arange(0, head_dim, 2, dtype=torch.float32, device=device) / head_dim
    return base ** -exponents  # (head_dim / 2,)


def _check_positions(positions, x: torch.Tensor) -> torch.Tensor:
    shape = "(T,) or (B, T)"
    check.tensor("positions", positions, shape)
    if positions.dtype.is_floating_point or positions.dtype == torch.bool or positions.is_complex():
        raise TypeError(
            f"positions must be an integer tensor of token positions, got dtype {positions.dtype}; "
            "e.g. torch.arange(T)"
        )
    check.ndim("positions", positions, (1, 2), shape)
    if positions.shape[-1] != x.shape[-2]:
        raise ValueError(
            f"positions has {positions.shape[-1]} entries per sequence but x has {x.shape[-2]} "
            f"tokens (x has shape {tuple(x.shape)}, tokens in dimension -2); give one position per token"
        )
    if positions.ndim == 2 and (x.ndim < 3 or positions.shape[0] not in (1, x.shape[0])):
        raise ValueError(
            f"positions of shape {tuple(positions.shape)} (B, T) need x of shape (B, ..., T, head_dim) "
            f"with the same B, got x of shape {tuple(x.shape)}"
        )
    if (positions < 0).any():
        raise ValueError(
            f"positions must be >= 0, got the smallest {int(positions.min())}; padding tokens get "
            "position 0 (see positions_from_padding)"
        )
    return positions.to(x.device)


def apply_rope(x: torch.Tensor, positions: torch.Tensor, base: float = ROPE_BASE) -> torch.Tensor:
    """Rotate queries or keys ``x`` ``(..., T, head_dim)`` by their positions.

    ``positions`` is ``(T,)`` (the same for every sequence) or ``(B, T)`` (one row per sequence,
    e.g. from :func:`positions_from_padding`; ``x`` is then ``(B, ..., T, head_dim)``, usually
    ``(B, H, T, head_dim)``). Pair ``i`` = numbers ``(2i, 2i + 1)`` of the token at position
    ``m`` is turned by ``m * theta_i``::

        (a, b) -> (a cos(m theta_i) - b sin(m theta_i), a sin(m theta_i) + b cos(m theta_i))

    The angles are computed in float32 (positions in the thousands need the precision) and the
    result has the dtype of ``x``.
    """
    check.floating_tensor("x", x, "(..., T, head_dim)")
    if x.ndim < 2:
        raise ValueError(f"x must have shape (..., T, head_dim), got shape {tuple(x.shape)}")
    head_dim = x.shape[-1]
    _even_head_dim(head_dim)
    positions = _check_positions(positions, x)
    angles = positions.float()[..., None] * rope_frequencies(head_dim, base, x.device)  # (..., T, hd/2)
    if positions.ndim == 2:  # (B, T, hd/2) -> (B, 1, ..., T, hd/2): the same for every head
        angles = angles.reshape(angles.shape[0], *([1] * (x.ndim - 3)), *angles.shape[1:])
    cos, sin = torch.cos(angles), torch.sin(angles)
    pairs = x.float().unflatten(-1, (head_dim // 2, 2))  # (..., T, hd/2, 2)
    first, second = pairs[..., 0], pairs[..., 1]  # (..., T, hd/2) each
    rotated = torch.stack((first * cos - second * sin, first * sin + second * cos), dim=-1)
    return rotated.flatten(-2).to(x.dtype)  # (..., T, head_dim)


def positions_from_padding(key_padding_mask: torch.Tensor) -> torch.Tensor:
    """Position ids ``(B, T)`` that skip padding: the first real token of every sequence is at 0.

    ``key_padding_mask`` is bool ``(B, T)``, ``True`` at padding. With left padding a sequence
    ``<pad> <pad> The dog`` gets positions ``0 0 0 1``: the pads take no position (their 0 is
    never used, they are masked), so "The" sits at 0 whatever the padding, exactly as in the
    sequence alone. Without this, RoPE (or learned positions) would see "The" at position 2.
    """
    check.tensor("key_padding_mask", key_padding_mask, "(B, T)")
    if key_padding_mask.dtype != torch.bool:
        raise TypeError(
            f"key_padding_mask must be a bool tensor (True = padding), got dtype {key_padding_mask.dtype}; "
            "e.g. token_ids == pad_id"
        )
    check.ndim("key_padding_mask", key_padding_mask, 2, "(B, T)")
    real = (~key_padding_mask).long()
    return (real.cumsum(dim=-1) - 1).clamp(min=0)  # (B, T): 0, 1, 2, ... over the real tokens


def next_positions(positions: torch.Tensor, num_new: int = 1) -> torch.Tensor:
    """The positions of ``num_new`` tokens that follow ``positions`` ``(T,)`` or ``(B, T)``:
    ``last + 1, ..., last + num_new`` per sequence. With a KV cache the new tokens continue where
    the cached ones stopped, so they must not start again at 0."""
    check.tensor("positions", positions, "(T,) or (B, T)")
    check.ndim("positions", positions, (1, 2), "(T,) or (B, T)")
    if positions.shape[-1] == 0:
        raise ValueError("positions is empty: there is no last position to continue from; start at 0")
    num_new = check.positive_int("num_new", num_new)
    steps = torch.arange(1, num_new + 1, device=positions.device)
    return positions[..., -1:] + steps  # (..., num_new)
