"""Chapter 6: cross-attention, where one sequence asks and another one answers.

Self-attention computes queries, keys and values from the *same* sequence. Cross-attention takes
the queries from one sequence ``x`` (for example the decoder's tokens in a translation model, or
the image patches of a diffusion model) and the keys and values from another sequence
``context`` (the encoder's output, or the text prompt's embeddings). The two sequences may have
different lengths and different embedding sizes; only the query and key projections must meet
in the same ``d_out_kq``-dimensional space::

    queries = x @ W_query          # (T_q,  d_in)      @ (d_in, d_out_kq)      -> (T_q,  d_out_kq)
    keys    = context @ W_key      # (T_kv, d_context) @ (d_context, d_out_kq) -> (T_kv, d_out_kq)
    values  = context @ W_value    # (T_kv, d_context) @ (d_context, d_out_v)  -> (T_kv, d_out_v)
    weights = softmax(queries @ keys.T / sqrt(d_out_kq), over the keys)  # (T_q, T_kv)
    output  = weights @ values                                          # (T_q, d_out_v)

With ``context = x`` (and ``d_context = d_in``) this is exactly self-attention.

Padding. A batch of context sequences of different lengths is padded to a common length; the
``key_padding_mask`` (``True`` = padding, as in :class:`torch.nn.MultiheadAttention`) hides those
keys from every query. If *every* key of a sequence is padding, the softmax of a row of ``-inf``
would be ``0 / 0 = NaN``. The attention core (:mod:`attention_book.functional`, which this
module calls) gives such a query all-zero weights and therefore an all-zero output, without ever
producing a NaN in the forward or the backward pass.
"""

from __future__ import annotations

from typing import Optional, Tuple, Union

import torch
import torch.nn as nn

from . import validation as check
from .functional import masked_softmax, scaled_dot_product_attention
from .masks import padding_mask

__all__ = ["CrossAttention", "padded_softmax"]


def padded_softmax(scores: torch.Tensor, key_padding_mask: Optional[torch.Tensor] = None) -> torch.Tensor:
    """Softmax over the last axis (the keys) that skips padded keys and never returns NaN.

    ``scores`` has shape ``(..., T_q, T_kv)``; ``key_padding_mask`` is ``None`` or a bool tensor
    that broadcasts to ``(..., T_kv)`` (``True`` = padding, gets weight 0). A row whose keys are
    all padding comes out as all zeros instead of NaN. This is the chapter's name for the core's
    :func:`attention_book.functional.masked_softmax` with the padding mask spread over the
    queries: ``masked_softmax(scores, key_padding_mask.unsqueeze(-2))``.
    """
    check.floating_tensor("scores", scores, "(..., T_q, T_kv)")
    if key_padding_mask is None:
        return masked_softmax(scores)
    check.ndim("scores", scores, tuple(range(2, 9)), "(..., T_q, T_kv)")
    check.bool_mask("key_padding_mask", key_padding_mask, scores.shape[:-2] + scores.shape[-1:],
                    meaning="True = padding")
    return masked_softmax(scores, padding_mask(key_padding_mask))  # (..., 1, T_kv): every query


class CrossAttention(nn.Module):
    """Single-head scaled dot-product cross-attention (row-vector convention ``x @ W``).

    Args:
        d_in: embedding size of the sequence the **queries** come from (``x``).
        d_out_kq: size of the queries and keys (they meet in a dot product, so it is shared).
        d_out_v: size of the values, hence of each output vector.
        qkv_bias: add a bias to the three projections.
        d_context: embedding size of the sequence the **keys and values** come from
            (``context``); defaults to ``d_in``.

    The projections are ``nn.Linear`` layers named ``W_query``, ``W_key`` and ``W_value`` (the same
    names as :class:`attention_book.attention.SelfAttention`, so a state dict can be moved between
    the two when ``d_context == d_in``). ``nn.Linear`` stores its weight as ``(d_out, d_in)``;
    the matrix of the ``x @ W`` convention is ``W_query.weight.T``.

    Example::

        >>> cross = CrossAttention(d_in=3, d_out_kq=2, d_out_v=4, d_context=16)
        >>> out = cross(torch.rand(6, 3), torch.rand(8, 16))   # (6, 4)
    """

    def __init__(
        self,
        d_in: int,
        d_out_kq: int,
        d_out_v: int,
        qkv_bias: bool = False,
        d_context: Optional[int] = None,
    ) -> None:
        super().__init__()
        self.d_in = check.positive_int("d_in", d_in)
        self.d_out_kq = check.positive_int("d_out_kq", d_out_kq)
        self.d_out_v = check.positive_int("d_out_v", d_out_v)
        qkv_bias = check.boolean("qkv_bias", qkv_bias)
        self.d_context = self.d_in if d_context is None else check.positive_int("d_context", d_context)
        self.W_query = nn.Linear(self.d_in, d_out_kq, bias=qkv_bias)
        self.W_key = nn.Linear(self.d_context, d_out_kq, bias=qkv_bias)
        self.W_value = nn.Linear(self.d_context, d_out_v, bias=qkv_bias)

    def extra_repr(self) -> str:
        return f"d_in={self.d_in}, d_context={self.d_context}, d_out_kq={self.d_out_kq}, d_out_v={self.d_out_v}"

    def check_inputs(self, x, context, key_padding_mask=None) -> None:
        """Raise a clear TypeError / ValueError unless ``x``, ``context`` and the mask fit the module."""
        shape = f"(T_q, {self.d_in}) or (B, T_q, {self.d_in})"
        check.floating_tensor("x", x, shape)
        check.ndim("x", x, (2, 3), shape)
        if x.shape[-1] != self.d_in:
            raise ValueError(
                f"x has embedding size {x.shape[-1]} but this CrossAttention was built with "
                f"d_in={self.d_in}: create it with d_in={x.shape[-1]} (the queries' input size)"
            )
        check.same_dtype("x", x, "the weights", self.W_query.weight)
        check.same_device("x", x, "the weights", self.W_query.weight)
        check.floating_tensor("context", context, f"(T_kv, {self.d_context}) or (B, T_kv, {self.d_context})")
        check.ndim("context", context, (2, 3), "(T, C) or (B, T, C)")
        check.context_tensor("context", context, x, self.d_context, "d_context")
        check.optional(check.key_padding_mask, "key_padding_mask", key_padding_mask, context)

    def forward(
        self,
        x: torch.Tensor,
        context: torch.Tensor,
        key_padding_mask: Optional[torch.Tensor] = None,
        return_weights: bool = False,
    ) -> Union[torch.Tensor, Tuple[torch.Tensor, torch.Tensor]]:
        """Attend from every token of ``x`` to the tokens of ``context``.

        Args:
            x: ``(T_q, d_in)`` or ``(B, T_q, d_in)``: the queries' sequence.
            context: ``(T_kv, d_context)`` or ``(B, T_kv, d_context)``: the keys' and values' sequence.
            key_padding_mask: optional bool ``(T_kv,)`` or ``(B, T_kv)``, ``True`` where the context
                token is padding. A query whose context is all padding gets zero weights and a
                zero output vector.
            return_weights: also return the attention weights ``(..., T_q, T_kv)``.

        Returns:
            The context vectors ``(..., T_q, d_out_v)``, and the weights if ``return_weights``.
        """
        self.check_inputs(x, context, key_padding_mask)
        check.boolean("return_weights", return_weights)
        queries = self.W_query(x)  # (B, T_q, d_out_kq)
        keys = self.W_key(context)  # (B, T_kv, d_out_kq)
        values = self.W_value(context)  # (B, T_kv, d_out_v)
        mask = None if key_padding_mask is None else padding_mask(key_padding_mask)  # (B, 1, T_kv)
        # (B, T_q, d_out_kq) @ (B, d_out_kq, T_kv) -> (B, T_q, T_kv), scaled by sqrt(d_out_kq), masked
        context_vectors, weights = scaled_dot_product_attention(queries, keys, values, mask=mask)
        return (context_vectors, weights) if return_weights else context_vectors
