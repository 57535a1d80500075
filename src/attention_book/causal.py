"""Chapter 7: causal (masked) self-attention.

* :func:`renormalise_masked`: hide entries of already-normalised weights, then rescale every row
  so it sums to 1 again (the "mask, then renormalise" recipe).
* :func:`masked_softmax`: the cheaper recipe: ``-inf`` in the hidden scores, then one softmax.
  Both give the same weights (chapter 7 shows it; ``tests/test_causal.py`` checks it).
* :class:`CausalAttention`: single-head scaled dot-product attention in which token ``t`` only
  sees tokens ``0 .. t``, with dropout on the attention weights; input ``(B, T, d_in)``.

Masks follow :func:`attention_book.masks.causal_mask`: a boolean tensor that is ``True`` where an
entry is *hidden* (a key in the future of its query).
"""

from __future__ import annotations

import math
from typing import Tuple, Union

import torch
from torch import nn

from .masks import causal_mask, check_context_length

__all__ = ["renormalise_masked", "masked_softmax", "CausalAttention"]


def _check_mask(values: torch.Tensor, hide: torch.Tensor, what: str) -> torch.Tensor:
    if not isinstance(hide, torch.Tensor):
        raise TypeError(f"the mask must be a tensor, got {type(hide).__name__}")
    if hide.dtype != torch.bool:
        raise TypeError(
            f"the mask must be boolean (True = hidden), got dtype {hide.dtype}; if you built it "
            "with torch.tril(torch.ones(T, T)) (1 = visible), pass `tril_mask == 0` instead"
        )
    try:
        torch.broadcast_shapes(hide.shape, values.shape)
    except RuntimeError:
        raise ValueError(
            f"the mask of shape {tuple(hide.shape)} does not broadcast against the {what} of "
            f"shape {tuple(values.shape)}; slice it to the number of tokens, e.g. mask[:T, :T]"
        ) from None
    return hide.to(values.device)


def renormalise_masked(weights: torch.Tensor, hide: torch.Tensor) -> torch.Tensor:
    """Zero the hidden entries of ``weights`` and rescale each row to sum to 1.

    ``weights`` are softmax outputs of shape ``(..., T, T)`` (each row sums to 1); ``hide`` is a
    boolean mask that broadcasts against them and is ``True`` where an entry must be hidden, e.g.
    ``causal_mask(T)``. A row in which every entry is hidden has nothing to renormalise: it comes
    out as NaN (0 / 0), exactly as ``-inf`` followed by a softmax does.
    """
    hide = _check_mask(weights, hide, "weights")
    kept = weights.masked_fill(hide, 0.0)  # hidden entries -> 0
    return kept / kept.sum(dim=-1, keepdim=True)  # each row sums to 1 again


def masked_softmax(scores: torch.Tensor, hide: torch.Tensor, safe: bool = False) -> torch.Tensor:
    """Softmax over the last dimension in which the entries where ``hide`` is True get weight 0.

    Puts ``-inf`` into the hidden scores first, so ``exp(-inf) = 0`` removes them from both the
    numerator and the denominator. With ``safe=False`` (the usual behaviour) a row whose entries are
    all hidden returns NaN; ``safe=True`` returns a row of zeros instead (useful with padding).
    """
    hide = _check_mask(scores, hide, "scores")
    weights = torch.softmax(scores.masked_fill(hide, float("-inf")), dim=-1)
    if safe:
        all_hidden = torch.broadcast_to(hide, scores.shape).all(dim=-1, keepdim=True)
        weights = weights.masked_fill(all_hidden, 0.0)
    return weights


class CausalAttention(nn.Module):
    """Single-head causal self-attention with dropout on the attention weights.

    Args:
        d_in: size of each input vector (the last dimension of ``x``).
        d_out: size of the queries, keys, values and of each output vector.
        context_length: the longest sequence the module accepts; the causal mask is built once
            for this length and sliced to the actual number of tokens in ``forward``.
        dropout: probability of zeroing an attention weight during training (0 disables it).
        qkv_bias: add a bias to the query, key and value projections.

    ``forward(x)`` takes ``(B, T, d_in)`` and returns ``(B, T, d_out)``; with
    ``return_weights=True`` it returns ``(context, weights)`` where ``weights`` has shape
    ``(B, T, T)`` (after dropout, as used). Output position ``t`` depends only on ``x[:, :t+1]``.

    The mask is a non-persistent buffer: it follows the module in ``.to(device)`` but is not
    saved in ``state_dict()`` (it is rebuilt from ``context_length``).
    """

    def __init__(self, d_in: int, d_out: int, context_length: int, dropout: float = 0.0,
                 qkv_bias: bool = False):
        super().__init__()
        for name, value in (("d_in", d_in), ("d_out", d_out), ("context_length", context_length)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if not 0.0 <= float(dropout) < 1.0:
            raise ValueError(
                f"dropout is a probability in [0, 1), got {dropout}; use e.g. 0.1 (or 0.0 for none)"
            )
        self.d_in, self.d_out, self.context_length = d_in, d_out, context_length
        # Created in the order query, key, value so that a seed reproduces the source's numbers.
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.dropout = nn.Dropout(dropout)
        # (context_length, context_length), True above the diagonal (= future keys)
        self.register_buffer("mask", causal_mask(context_length), persistent=False)

    def forward(
        self, x: torch.Tensor, return_weights: bool = False
    ) -> Union[torch.Tensor, Tuple[torch.Tensor, torch.Tensor]]:
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"x must be a tensor of shape (B, T, d_in), got {type(x).__name__}")
        if x.ndim != 3:
            hint = "; add a batch dimension with x.unsqueeze(0)" if x.ndim == 2 else ""
            raise ValueError(f"x must have shape (B, T, d_in), got {tuple(x.shape)}{hint}")
        batch_size, num_tokens, d_in = x.shape
        if d_in != self.d_in:
            raise ValueError(
                f"x has {d_in} features per token but the module was built with d_in={self.d_in}; "
                f"create it with CausalAttention(d_in={d_in}, ...)"
            )
        check_context_length(num_tokens, self.context_length)

        queries = self.W_query(x)  # (B, T, d_out)
        keys = self.W_key(x)  # (B, T, d_out)
        values = self.W_value(x)  # (B, T, d_out)

        scores = queries @ keys.transpose(1, 2)  # (B, T, d_out) @ (B, d_out, T) -> (B, T, T)
        future = self.mask[:num_tokens, :num_tokens]  # (T, T), broadcasts over the batch
        scores = scores.masked_fill(future, float("-inf"))
        weights = torch.softmax(scores / math.sqrt(keys.shape[-1]), dim=-1)  # rows sum to 1
        weights = self.dropout(weights)  # training only; survivors scaled by 1 / (1 - p)

        context = weights @ values  # (B, T, T) @ (B, T, d_out) -> (B, T, d_out)
        return (context, weights) if return_weights else context

    def extra_repr(self) -> str:
        return f"context_length={self.context_length}"
