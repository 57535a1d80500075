"""Multi-head attention (chapter 5): several attention heads side by side.

Two versions of the same idea:

* :class:`MultiHeadAttentionWrapper` keeps ``num_heads`` independent single heads (chapter 4's
  :class:`~attention_book.attention.SelfAttention`) in an ``nn.ModuleList``, runs them one after
  another and concatenates their outputs. Easy to read, slow (one small matrix product per head).
* :class:`MultiHeadAttention` computes the queries, keys and values of all heads with one
  projection each, splits the result into heads with ``view`` + ``transpose``
  (:func:`split_heads`), attends in all heads at once with batched matrix products and mixes the
  heads with an output projection. Its constructor has the signature of the LLM-from-scratch
  book, so it drops into that book's GPT. The same module does self-attention (``causal=True``
  hides future tokens, ``causal=False`` is bidirectional), cross-attention (``context``: keys and
  values from another sequence of width ``kdim``, chapter 6) and padded batches
  (``key_padding_mask``, ``attn_mask``): the pieces of a transformer decoder layer.

Both take ``(B, T, d_in)`` and return ``(B, T, d_out)``. With ``return_weights=True`` the
forward pass also returns the attention weights ``(B, H, T_q, T_k)``. The attention itself is
:func:`attention_book.functional.scaled_dot_product_attention`, so a query whose keys are all
masked gets zero weights and a zero context vector, never NaN.
"""

from __future__ import annotations

from typing import Optional, Tuple, Union

import torch
from torch import nn

from . import validation as check
from .attention import SelfAttention
from .functional import scaled_dot_product_attention
from .masks import causal_mask, combine_masks, padding_mask

__all__ = ["MultiHeadAttention", "MultiHeadAttentionWrapper", "split_heads", "merge_heads"]


# --------------------------------------------------------------------------------------------
# Splitting one projection into heads, and back
# --------------------------------------------------------------------------------------------


def split_heads(tensor: torch.Tensor, num_heads: int) -> torch.Tensor:
    """``(B, T, d_out)`` -> ``(B, H, T, d_out / H)``: head ``h`` gets columns ``h * hd:(h + 1) * hd``."""
    batch_size, num_tokens, width = tensor.shape
    # view: (B, T, H, hd) splits the last dimension; transpose makes heads a batch-like dimension
    return tensor.view(batch_size, num_tokens, num_heads, width // num_heads).transpose(1, 2)


def merge_heads(tensor: torch.Tensor) -> torch.Tensor:
    """``(B, H, T, hd)`` -> ``(B, T, H * hd)``: the heads side by side again (undoes :func:`split_heads`)."""
    batch_size, num_heads, num_tokens, head_dim = tensor.shape
    return tensor.transpose(1, 2).contiguous().view(batch_size, num_tokens, num_heads * head_dim)


# --------------------------------------------------------------------------------------------
# Configuration checks shared by both classes
# --------------------------------------------------------------------------------------------


def _check_config(d_in, d_out, context_length, dropout, num_heads, qkv_bias, causal) -> None:
    for name, value in (("d_in", d_in), ("d_out", d_out), ("context_length", context_length),
                        ("num_heads", num_heads)):
        check.positive_int(name, value)
    check.probability("dropout", dropout)
    check.boolean("qkv_bias", qkv_bias)
    check.boolean("causal", causal)
    if d_out % num_heads != 0:
        lower = (d_out // num_heads) * num_heads
        multiples = [m for m in (lower, lower + num_heads) if m > 0]
        divisors = tuple(k for k in range(1, d_out + 1) if d_out % k == 0)
        raise ValueError(
            f"d_out={d_out} is not divisible by num_heads={num_heads}: choose num_heads from "
            f"{divisors}, or make d_out a multiple of {num_heads} "
            f"(e.g. {' or '.join(map(str, multiples))})"
        )


def _check_x(x, d_in: int, context_length: int, weight: torch.Tensor) -> None:
    """A ``(B, T, d_in)`` float input with ``T <= context_length`` in the dtype/device of ``weight``."""
    shape = f"(B, T, d_in) = (B, T, {d_in})"
    check.floating_tensor("x", x, shape)
    check.ndim("x", x, 3, shape)
    check.last_dim("x", x, d_in, "d_in")
    check.sequence_length("x", x.shape[1], context_length)
    check.same_dtype("x", x, "the weights", weight)
    check.same_device("x", x, "the weights", weight)


# --------------------------------------------------------------------------------------------
# Multi-head attention with one projection split into heads
# --------------------------------------------------------------------------------------------


class MultiHeadAttention(nn.Module):
    """Multi-head attention: ``(B, T, d_in)`` -> ``(B, T, d_out)``; self- or cross-attention.

    Args:
        d_in: size of each input vector (the queries' sequence ``x``).
        d_out: size of each output vector; split into ``num_heads`` heads of
            ``head_dim = d_out // num_heads`` columns each.
        context_length: the longest ``x`` the module accepts (size of the causal mask buffer).
        dropout: probability of dropping an attention weight during training (0.0 = off).
        num_heads: number of heads; must divide ``d_out``.
        qkv_bias: add a bias to the query, key and value projections.
        causal: hide future tokens (GPT-style self-attention); ``False`` lets every token see
            every token (an encoder, or cross-attention).
        kdim: width of the ``context`` that keys and values come from in cross-attention
            (default ``d_in``; as ``kdim`` = ``vdim`` of :class:`torch.nn.MultiheadAttention`).

    Attributes ``W_query`` (``nn.Linear(d_in, d_out)``), ``W_key``, ``W_value``
    (``nn.Linear(kdim, d_out)``) and ``out_proj`` (``nn.Linear(d_out, d_out)``) are named as in the
    LLM-from-scratch book and created in its order, so the same seed gives the same weights and
    its weight-loading code works unchanged. Head ``h`` uses output columns
    ``h * head_dim:(h + 1) * head_dim`` of each projection.
    """

    def __init__(
        self,
        d_in: int,
        d_out: int,
        context_length: int,
        dropout: float,
        num_heads: int,
        qkv_bias: bool = False,
        causal: bool = True,
        kdim: Optional[int] = None,
    ):
        super().__init__()
        _check_config(d_in, d_out, context_length, dropout, num_heads, qkv_bias, causal)
        self.d_in, self.d_out = d_in, d_out
        self.kdim = d_in if kdim is None else check.positive_int("kdim", kdim)
        self.context_length = context_length
        self.num_heads = num_heads
        self.head_dim = d_out // num_heads
        self.causal = causal
        # One projection per role covers all heads: columns h*head_dim:(h+1)*head_dim are head h.
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(self.kdim, d_out, bias=qkv_bias)  # reads x, or context in cross-attention
        self.W_value = nn.Linear(self.kdim, d_out, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)  # mixes the concatenated heads
        self.dropout = nn.Dropout(dropout)
        # A buffer follows .to(device) and is not trained. It is saved in the state_dict under the
        # LLM-from-scratch book's name "mask", so state_dicts move between the two classes.
        # Bidirectional attention needs no mask (a None buffer is left out of the state_dict).
        self.register_buffer("mask", causal_mask(context_length) if causal else None)

    def check_inputs(self, x, context=None, key_padding_mask=None, attn_mask=None) -> None:
        """Raise a clear TypeError / ValueError unless the arguments of :meth:`forward` fit."""
        _check_x(x, self.d_in, self.context_length, self.W_query.weight)
        if context is None:
            if self.kdim != self.d_in:
                raise ValueError(
                    f"this module was built for cross-attention with kdim={self.kdim} != d_in={self.d_in}: "
                    f"pass context=... of shape (B, T_kv, {self.kdim}), or build it without kdim for self-attention"
                )
            source = x
        else:
            if self.causal:
                raise ValueError(
                    "context is given but this module was built with causal=True: the causal mask hides "
                    "future tokens of the same sequence, while cross-attention keys come from another "
                    "sequence; build the cross-attention module with causal=False"
                )
            check.ndim("context", check.floating_tensor("context", context), 3, f"(B, T_kv, {self.kdim})")
            source = check.context_tensor("context", context, x, self.kdim, "kdim")
        check.optional(check.key_padding_mask, "key_padding_mask", key_padding_mask, source)
        weights_shape = (x.shape[0], self.num_heads, x.shape[1], source.shape[1])  # (B, H, T_q, T_k)
        check.optional(check.bool_mask, "attn_mask", attn_mask, weights_shape)

    def forward(
        self,
        x: torch.Tensor,
        context: Optional[torch.Tensor] = None,
        key_padding_mask: Optional[torch.Tensor] = None,
        attn_mask: Optional[torch.Tensor] = None,
        return_weights: bool = False,
    ) -> Union[torch.Tensor, Tuple[torch.Tensor, torch.Tensor]]:
        """Attend from ``x`` ``(B, T_q, d_in)`` to itself, or to ``context``; returns ``(B, T_q, d_out)``.

        Args:
            x: the queries' sequence ``(B, T_q, d_in)``, ``T_q <= context_length``.
            context: ``None`` for self-attention, or the keys' and values' sequence
                ``(B, T_k, kdim)`` for cross-attention (any length; needs ``causal=False``).
            key_padding_mask: optional bool ``(B, T_k)``, ``True`` where a key is padding.
            attn_mask: optional bool mask broadcastable to ``(B, H, T_q, T_k)``, ``True`` = hidden
                (e.g. ``(T_q, T_k)``), the convention of ``torch.nn.MultiheadAttention``.
            return_weights: also return the weights ``(B, num_heads, T_q, T_k)`` each head used
                (after dropout in training mode).

        The causal mask (if ``causal``), ``attn_mask`` and ``key_padding_mask`` combine: a key is
        hidden if any of them hides it. A query with no visible key gets zero weights and a zero
        vector before ``out_proj`` (so its output is ``out_proj.bias``), never NaN.
        """
        self.check_inputs(x, context, key_padding_mask, attn_mask)
        check.boolean("return_weights", return_weights)
        source = x if context is None else context  # where keys and values come from
        num_queries, num_keys, H = x.shape[1], source.shape[1], self.num_heads
        # 1. project once for all heads, then split: (B, T, d_out) -> (B, H, T, head_dim)
        queries = split_heads(self.W_query(x), H)  # (B, H, T_q, hd)
        keys = split_heads(self.W_key(source), H)  # (B, H, T_k, hd)
        values = split_heads(self.W_value(source), H)  # (B, H, T_k, hd)
        # 2. one mask: future keys OR attn_mask OR padded keys, broadcast to (B, H, T_q, T_k)
        mask = combine_masks(
            self.mask[:num_queries, :num_keys] if self.causal else None,  # (T_q, T_k)
            attn_mask,
            None if key_padding_mask is None else padding_mask(key_padding_mask, num_query_dims=2),
        )
        # 3. scaled dot-product attention in every head at once (the attention core)
        attended, weights = scaled_dot_product_attention(queries, keys, values, mask=mask,
                                                         dropout=self.dropout)  # (B, H, T_q, hd)
        # 4. heads side by side again, then mix them: (B, H, T_q, hd) -> (B, T_q, d_out)
        output = self.out_proj(merge_heads(attended))
        return (output, weights) if return_weights else output

    def extra_repr(self) -> str:
        kdim = f", kdim={self.kdim}" if self.kdim != self.d_in else ""
        return f"num_heads={self.num_heads}, head_dim={self.head_dim}, causal={self.causal}{kdim}"


# --------------------------------------------------------------------------------------------
# The same thing built from independent heads
# --------------------------------------------------------------------------------------------


class MultiHeadAttentionWrapper(nn.Module):
    """``num_heads`` independent single heads whose outputs are concatenated.

    Each head is chapter 4's :class:`attention_book.attention.SelfAttention` with
    ``d_out // num_heads`` outputs; the wrapper adds what chapter 4 does not have, the causal
    mask (``causal=True``) and dropout on each head's weights, and runs every head through the
    attention core. A head creates its query, key and value ``nn.Linear`` layers in that order,
    so a seed gives the same weights as the LLM-from-scratch book's wrapper.

    Same constructor and shapes as :class:`MultiHeadAttention`: ``d_out`` is the size of the
    *concatenated* output, so each head has ``d_out // num_heads`` columns. (The LLM-from-scratch
    book passes the per-head size instead: its ``MultiHeadAttentionWrapper(d_in, 2, ...,
    num_heads=2)`` is this class with ``d_out=4``.) There is no output projection: the wrapper is
    the "just concatenate" version that :class:`MultiHeadAttention` makes efficient.
    """

    def __init__(self, d_in: int, d_out: int, context_length: int, dropout: float, num_heads: int,
                 qkv_bias: bool = False, causal: bool = True):  # MultiHeadAttention's, without kdim
        super().__init__()
        _check_config(d_in, d_out, context_length, dropout, num_heads, qkv_bias, causal)
        self.d_in, self.d_out, self.num_heads = d_in, d_out, num_heads
        self.head_dim = d_out // num_heads
        self.context_length, self.causal = context_length, causal
        self.heads = nn.ModuleList(SelfAttention(d_in, self.head_dim, qkv_bias=qkv_bias)
                                   for _ in range(num_heads))
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("mask", causal_mask(context_length) if causal else None, persistent=False)

    def forward(self, x, return_weights: bool = False):
        """``(B, T, d_in)`` -> ``(B, T, d_out)``; with ``return_weights=True`` also the weights
        ``(B, num_heads, T, T)``."""
        _check_x(x, self.d_in, self.context_length, self.heads[0].W_query.weight)
        check.boolean("return_weights", return_weights)
        num_tokens = x.shape[1]
        mask = self.mask[:num_tokens, :num_tokens] if self.causal else None  # (T, T)
        results = [scaled_dot_product_attention(*head.project(x), mask=mask, dropout=self.dropout)
                   for head in self.heads]  # one (context, weights) pair per head
        output = torch.cat([context for context, _ in results], dim=-1)  # (B, T, H * head_dim)
        if not return_weights:
            return output
        return output, torch.stack([weights for _, weights in results], dim=1)  # (B, H, T, T)

    def extra_repr(self) -> str:
        return f"num_heads={self.num_heads}, head_dim={self.head_dim}, causal={self.causal}"
