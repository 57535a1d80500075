"""Chapter 7: causal (masked) self-attention.

* :func:`renormalise_masked`: hide entries of already-normalised weights, then rescale every row
  so it sums to 1 again (the "mask, then renormalise" recipe, written out to teach it).
* :func:`masked_softmax`: the cheaper recipe, ``-inf`` in the hidden scores, then one softmax.
  It *is* the attention core's :func:`attention_book.functional.masked_softmax` (re-exported
  here under the chapter's name). Both recipes give the same weights, and both give an all-zero
  row when every entry of a row is hidden (the core's rule; a plain softmax would give NaN).
  ``tests/test_causal.py`` checks both statements.
* :class:`CausalAttention`: chapter 4's :class:`~attention_book.attention.SelfAttention` in which
  token ``t`` only sees tokens ``0 .. t``, with dropout on the attention weights; input
  ``(B, T, d_in)``.

Masks follow :func:`attention_book.masks.causal_mask`: a boolean tensor that is ``True`` where an
entry is *hidden* (a key in the future of its query).
"""

from __future__ import annotations

from typing import Tuple, Union

import torch
from torch import nn

from . import validation as check
from .attention import SelfAttention
from .functional import masked_softmax, scaled_dot_product_attention
from .masks import causal_mask

__all__ = ["renormalise_masked", "masked_softmax", "CausalAttention"]


def renormalise_masked(weights: torch.Tensor, hide: torch.Tensor) -> torch.Tensor:
    """Zero the hidden entries of ``weights`` and rescale each row to sum to 1.

    ``weights`` are softmax outputs of shape ``(..., T, T)`` (each row sums to 1); ``hide`` is a
    boolean mask that broadcasts against them and is ``True`` where an entry must be hidden, e.g.
    ``causal_mask(T)``. A row in which every entry is hidden has nothing to renormalise: it comes
    out as zeros (``0 / 1`` instead of ``0 / 0 = NaN``), the rule of the attention core.
    """
    check.floating_tensor("weights", weights)
    hide = check.bool_mask("hide", hide, weights.shape).to(weights.device)
    kept = weights.masked_fill(hide, 0.0)  # hidden entries -> 0
    total = kept.sum(dim=-1, keepdim=True)  # 0 only where the whole row is hidden
    return kept / torch.where(total > 0, total, torch.ones_like(total))  # rows sum to 1 again


class CausalAttention(SelfAttention):
    """Single-head causal self-attention with dropout on the attention weights.

    Args:
        d_in: size of each input vector (the last dimension of ``x``).
        d_out: size of the queries, keys, values and of each output vector.
        context_length: the longest sequence the module accepts; the causal mask is built once
            for this length and sliced to the actual number of tokens in ``forward``.
        dropout: probability of zeroing an attention weight during training (0 disables it).
        qkv_bias: add a bias to the query, key and value projections.

    It is chapter 4's :class:`~attention_book.attention.SelfAttention` (``W_query``, ``W_key``,
    ``W_value`` created in that order, so a seed reproduces the source's numbers) plus a mask and
    dropout. ``forward(x)`` takes ``(B, T, d_in)`` and returns ``(B, T, d_out)``; with
    ``return_weights=True`` it returns ``(context, weights)`` where ``weights`` has shape
    ``(B, T, T)`` (after dropout, as used). Output position ``t`` depends only on ``x[:, :t+1]``.

    The mask is a non-persistent buffer: it follows the module in ``.to(device)`` but is not
    saved in ``state_dict()`` (it is rebuilt from ``context_length``).
    """

    def __init__(self, d_in: int, d_out: int, context_length: int, dropout: float = 0.0,
                 qkv_bias: bool = False):
        check.positive_int("d_out", d_out)  # (SelfAttention would call it d_out_kq)
        super().__init__(d_in, d_out, qkv_bias=qkv_bias)  # checks d_in and qkv_bias
        self.d_out = self.d_out_v
        self.context_length = check.positive_int("context_length", context_length)
        self.dropout = nn.Dropout(check.probability("dropout", dropout))
        # (context_length, context_length), True above the diagonal (= future keys)
        self.register_buffer("mask", causal_mask(context_length), persistent=False)

    def check_input(self, x) -> torch.Tensor:
        """Like :meth:`SelfAttention.check_input`, but batched ``(B, T, d_in)`` and ``T <= context_length``."""
        check.floating_tensor("x", x, f"(B, T, {self.d_in})")
        check.ndim("x", x, 3, f"(B, T, d_in) = (B, T, {self.d_in})")
        super().check_input(x)
        check.sequence_length("x", x.shape[1], self.context_length)
        return x

    def forward(
        self, x: torch.Tensor, return_weights: bool = False
    ) -> Union[torch.Tensor, Tuple[torch.Tensor, torch.Tensor]]:
        self.check_input(x)
        check.boolean("return_weights", return_weights)
        num_tokens = x.shape[1]
        queries, keys, values = self.project(x)  # (B, T, d_out) each
        future = self.mask[:num_tokens, :num_tokens]  # (T, T), broadcasts over the batch
        context, weights = scaled_dot_product_attention(
            queries, keys, values, mask=future, dropout=self.dropout
        )  # (B, T, d_out), (B, T, T): rows sum to 1 over the past (before dropout)
        return (context, weights) if return_weights else context

    def extra_repr(self) -> str:
        return f"d_in={self.d_in}, d_out={self.d_out}, context_length={self.context_length}, qkv_bias={self.qkv_bias}"
