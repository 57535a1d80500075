"""Multi-head attention (chapter 5): several attention heads side by side.

Two versions of the same idea:

* :class:`MultiHeadAttentionWrapper` keeps ``num_heads`` independent single heads in an
  ``nn.ModuleList``, runs them one after another and concatenates their outputs. Easy to read,
  slow (one small matrix product per head).
* :class:`MultiHeadAttention` computes the queries, keys and values of all heads with one
  projection each, splits the result into heads with ``view`` + ``transpose``, attends in all
  heads at once with batched matrix products and mixes the heads with an output projection.
  Its constructor has the signature of the LLM-from-scratch book, so it drops into that book's GPT.

Both take ``(B, T, d_in)`` and return ``(B, T, d_out)``; ``causal=True`` (the default) hides
future tokens, ``causal=False`` gives bidirectional attention (chapter 7 explains the switch).
With ``return_weights=True`` the forward pass also returns the attention weights ``(B, H, T, T)``.
"""

from __future__ import annotations

from typing import Tuple, Union

import torch
from torch import nn

from .attention import SelfAttention
from .causal import CausalAttention
from .masks import causal_mask, check_context_length

__all__ = ["MultiHeadAttention", "MultiHeadAttentionWrapper"]


# --------------------------------------------------------------------------------------------
# Input checks with messages that say how to fix the problem
# --------------------------------------------------------------------------------------------


def _divisors(n: int) -> Tuple[int, ...]:
    return tuple(k for k in range(1, n + 1) if n % k == 0)


def _check_divisible(d_out: int, num_heads: int) -> None:
    if d_out % num_heads != 0:
        lower = (d_out // num_heads) * num_heads
        multiples = [m for m in (lower, lower + num_heads) if m > 0]
        raise ValueError(
            f"d_out={d_out} is not divisible by num_heads={num_heads}: choose num_heads from "
            f"{_divisors(d_out)}, or make d_out a multiple of {num_heads} "
            f"(e.g. {' or '.join(map(str, multiples))})"
        )


def _check_positive_int(name: str, value) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {type(value).__name__} ({value!r})")
    if value < 1:
        raise ValueError(f"{name} must be at least 1, got {value}")


def _check_dropout(dropout) -> None:
    if not isinstance(dropout, (int, float)) or isinstance(dropout, bool):
        raise TypeError(f"dropout must be a float probability, got {type(dropout).__name__}")
    if not 0.0 <= dropout < 1.0:
        raise ValueError(f"dropout must be in [0, 1), got {dropout}; use 0.0 to switch it off")


def _check_input(x, d_in: int, context_length: int) -> None:
    """Validate a ``(B, T, d_in)`` input before any matrix product can fail obscurely."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"expected a torch.Tensor of shape (B, T, {d_in}), got {type(x).__name__}")
    if not x.is_floating_point():
        raise TypeError(
            f"expected float embeddings of shape (B, T, {d_in}), got dtype {x.dtype}; "
            "token ids must go through an embedding layer (nn.Embedding) first"
        )
    if x.ndim != 3:
        fix = " add a batch dimension with x.unsqueeze(0)" if x.ndim == 2 else ""
        raise ValueError(
            f"expected a 3-D input (batch, tokens, d_in) = (B, T, {d_in}), got shape "
            f"{tuple(x.shape)};{fix or ' reshape it to (B, T, d_in)'}"
        )
    if x.shape[-1] != d_in:
        raise ValueError(
            f"the input's last dimension is {x.shape[-1]} but this module was built with "
            f"d_in={d_in}; create it with d_in={x.shape[-1]} or project the input to {d_in} features"
        )
    check_context_length(x.shape[1], context_length)


def _check_config(d_in, d_out, context_length, dropout, num_heads, qkv_bias, causal) -> None:
    for name, value in (("d_in", d_in), ("d_out", d_out), ("context_length", context_length),
                        ("num_heads", num_heads)):
        _check_positive_int(name, value)
    _check_dropout(dropout)
    for name, value in (("qkv_bias", qkv_bias), ("causal", causal)):
        if not isinstance(value, bool):
            raise TypeError(f"{name} must be True or False, got {value!r}")
    _check_divisible(d_out, num_heads)


# --------------------------------------------------------------------------------------------
# Multi-head attention with one projection split into heads
# --------------------------------------------------------------------------------------------


class MultiHeadAttention(nn.Module):
    """Multi-head self-attention: ``(B, T, d_in)`` -> ``(B, T, d_out)``.

    Args:
        d_in: size of each input vector.
        d_out: size of each output vector; split into ``num_heads`` heads of
            ``head_dim = d_out // num_heads`` columns each.
        context_length: the longest sequence the module accepts (size of the mask buffer).
        dropout: probability of dropping an attention weight during training (0.0 = off).
        num_heads: number of heads; must divide ``d_out``.
        qkv_bias: add a bias to the query, key and value projections.
        causal: hide future tokens (GPT-style); ``False`` lets every token see every token.

    Attributes ``W_query``, ``W_key``, ``W_value`` (``nn.Linear(d_in, d_out)``) and ``out_proj``
    (``nn.Linear(d_out, d_out)``) are named as in the LLM-from-scratch book, so its weight-loading
    code works unchanged. Head ``h`` uses output columns ``h * head_dim:(h + 1) * head_dim`` of
    each projection.
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
    ):
        super().__init__()
        _check_config(d_in, d_out, context_length, dropout, num_heads, qkv_bias, causal)
        self.d_in, self.d_out = d_in, d_out
        self.context_length = context_length
        self.num_heads = num_heads
        self.head_dim = d_out // num_heads
        self.causal = causal
        # One projection per role covers all heads: columns h*head_dim:(h+1)*head_dim are head h.
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)  # mixes the concatenated heads
        self.dropout = nn.Dropout(dropout)
        # A buffer follows .to(device) and is not trained. It is saved in the state_dict under the
        # LLM-from-scratch book's name "mask", so state_dicts move between the two classes.
        # Bidirectional attention needs no mask (a None buffer is left out of the state_dict).
        self.register_buffer("mask", causal_mask(context_length) if causal else None)

    def forward(
        self, x: torch.Tensor, return_weights: bool = False
    ) -> Union[torch.Tensor, Tuple[torch.Tensor, torch.Tensor]]:
        """Attend over ``x`` ``(B, T, d_in)``; returns ``(B, T, d_out)``.

        With ``return_weights=True`` returns ``(context, weights)`` where ``weights`` is
        ``(B, num_heads, T, T)``: the weights each head used (after dropout in training mode).
        """
        _check_input(x, self.d_in, self.context_length)
        batch_size, num_tokens, _ = x.shape
        B, T, H, hd = batch_size, num_tokens, self.num_heads, self.head_dim
        # 1. project once for all heads: (B, T, d_in) -> (B, T, d_out)
        queries, keys, values = self.W_query(x), self.W_key(x), self.W_value(x)
        # 2. split the last dimension into heads, then make heads a batch-like dimension:
        #    (B, T, d_out) -> view -> (B, T, H, hd) -> transpose(1, 2) -> (B, H, T, hd)
        queries = queries.view(B, T, H, hd).transpose(1, 2)
        keys = keys.view(B, T, H, hd).transpose(1, 2)
        values = values.view(B, T, H, hd).transpose(1, 2)
        # 3. scaled dot-product attention in every head at once
        scores = queries @ keys.transpose(2, 3)  # (B, H, T, hd) @ (B, H, hd, T) -> (B, H, T, T)
        if self.causal:
            scores = scores.masked_fill(self.mask[:T, :T], float("-inf"))  # hide future keys
        weights = torch.softmax(scores / hd**0.5, dim=-1)  # (B, H, T, T), rows sum to 1
        weights = self.dropout(weights)  # training only
        context = weights @ values  # (B, H, T, T) @ (B, H, T, hd) -> (B, H, T, hd)
        # 4. undo the split: (B, H, T, hd) -> (B, T, H, hd) -> (B, T, d_out), heads side by side
        context = context.transpose(1, 2).contiguous().view(B, T, self.d_out)
        # 5. mix the heads
        output = self.out_proj(context)  # (B, T, d_out)
        return (output, weights) if return_weights else output

    def extra_repr(self) -> str:
        return f"num_heads={self.num_heads}, head_dim={self.head_dim}, causal={self.causal}"


# --------------------------------------------------------------------------------------------
# The same thing built from independent heads
# --------------------------------------------------------------------------------------------


class MultiHeadAttentionWrapper(nn.Module):
    """``num_heads`` independent single heads whose outputs are concatenated.

    The heads are the single-head modules of earlier chapters, so no attention math is repeated
    here: :class:`attention_book.causal.CausalAttention` when ``causal=True`` (with dropout) and
    :class:`attention_book.attention.SelfAttention` when ``causal=False`` (no dropout, so
    ``dropout`` must be 0). Both create their query, key and value ``nn.Linear`` layers in that
    order, so a seed gives the same weights as the LLM-from-scratch book's wrapper.

    Same constructor and shapes as :class:`MultiHeadAttention`: ``d_out`` is the size of the
    *concatenated* output, so each head has ``d_out // num_heads`` columns. (The LLM-from-scratch
    book passes the per-head size instead: its ``MultiHeadAttentionWrapper(d_in, 2, ...,
    num_heads=2)`` is this class with ``d_out=4``.) There is no output projection: the wrapper is
    the "just concatenate" version that :class:`MultiHeadAttention` makes efficient.
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
    ):
        super().__init__()
        _check_config(d_in, d_out, context_length, dropout, num_heads, qkv_bias, causal)
        self.d_in, self.d_out, self.num_heads = d_in, d_out, num_heads
        self.head_dim = d_out // num_heads
        self.context_length, self.causal = context_length, causal
        if causal:  # chapter 7's single causal head (with dropout)
            heads = [CausalAttention(d_in, self.head_dim, context_length, dropout, qkv_bias)
                     for _ in range(num_heads)]
        else:  # chapter 4's single head; it has no dropout
            if dropout > 0:
                raise ValueError(
                    f"dropout={dropout} needs causal=True here: the bidirectional heads are "
                    "chapter 4's SelfAttention, which has no dropout. Use dropout=0.0, or "
                    "MultiHeadAttention(..., causal=False), which supports dropout"
                )
            heads = [SelfAttention(d_in, self.head_dim, qkv_bias=qkv_bias)
                     for _ in range(num_heads)]
        self.heads = nn.ModuleList(heads)

    def forward(self, x, return_weights: bool = False):
        """``(B, T, d_in)`` -> ``(B, T, d_out)``; with ``return_weights=True`` also the weights
        ``(B, num_heads, T, T)``."""
        _check_input(x, self.d_in, self.context_length)
        results = [head(x, return_weights=True) for head in self.heads]
        output = torch.cat([context for context, _ in results], dim=-1)  # (B, T, H * head_dim)
        if not return_weights:
            return output
        return output, torch.stack([weights for _, weights in results], dim=1)  # (B, H, T, T)
