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
would be ``0 / 0 = NaN``. This module gives such a query all-zero weights and therefore an all-zero
output (the same choice as :func:`torch.nn.functional.scaled_dot_product_attention`), without ever
producing a NaN in the forward or the backward pass.
"""

from __future__ import annotations

from typing import Optional, Tuple, Union

import torch
import torch.nn as nn

__all__ = ["CrossAttention", "padded_softmax"]


def padded_softmax(scores: torch.Tensor, key_padding_mask: Optional[torch.Tensor] = None) -> torch.Tensor:
    """Softmax over the last axis (the keys) that skips padded keys and never returns NaN.

    ``scores`` has shape ``(..., T_q, T_kv)``; ``key_padding_mask`` is ``None`` or a bool tensor
    that broadcasts to ``(..., 1, T_kv)`` (``True`` = padding, gets weight 0). A row whose keys are
    all padding comes out as all zeros instead of NaN: its scores are left unmasked for the
    softmax (so nothing is computed from ``-inf`` alone) and the result is zeroed afterwards.
    """
    if key_padding_mask is None:
        return torch.softmax(scores, dim=-1)
    # (..., 1, T_kv): one mask row shared by every query of the sequence
    mask = key_padding_mask.unsqueeze(-2)
    fully_masked = mask.all(dim=-1, keepdim=True)  # (..., 1, 1)
    scores = scores.masked_fill(mask & ~fully_masked, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return weights.masked_fill(fully_masked, 0.0)


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
        d_context = d_in if d_context is None else d_context
        for name, value in (("d_in", d_in), ("d_out_kq", d_out_kq), ("d_out_v", d_out_v), ("d_context", d_context)):
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(f"{name} must be an int, got {type(value).__name__} ({value!r})")
            if value < 1:
                raise ValueError(f"{name} must be a positive size, got {value}")
        self.d_in = d_in
        self.d_context = d_context
        self.d_out_kq = d_out_kq
        self.d_out_v = d_out_v
        self.W_query = nn.Linear(d_in, d_out_kq, bias=qkv_bias)
        self.W_key = nn.Linear(d_context, d_out_kq, bias=qkv_bias)
        self.W_value = nn.Linear(d_context, d_out_v, bias=qkv_bias)

    def extra_repr(self) -> str:
        return f"d_in={self.d_in}, d_context={self.d_context}, d_out_kq={self.d_out_kq}, d_out_v={self.d_out_v}"

    def _check_inputs(self, x, context, key_padding_mask) -> None:
        for name, tensor in (("x", x), ("context", context)):
            if not isinstance(tensor, torch.Tensor):
                raise TypeError(f"{name} must be a torch.Tensor, got {type(tensor).__name__}")
            if tensor.ndim not in (2, 3):
                raise ValueError(
                    f"{name} must have shape (T, C) or (B, T, C), got {tuple(tensor.shape)}"
                )
        if x.ndim != context.ndim:
            raise ValueError(
                f"x has shape {tuple(x.shape)} but context has shape {tuple(context.shape)}: pass both "
                "with a batch axis (B, T, C) or both without one (T, C)"
            )
        if x.ndim == 3 and x.shape[0] != context.shape[0]:
            raise ValueError(
                f"x holds {x.shape[0]} sequences but context holds {context.shape[0]}: each query "
                "sequence needs its own context sequence (repeat the context with "
                "context.expand(B, -1, -1) if it is shared)"
            )
        if x.shape[-1] != self.d_in:
            raise ValueError(
                f"x has embedding size {x.shape[-1]} but this CrossAttention was built with "
                f"d_in={self.d_in}: create it with d_in={x.shape[-1]} (the queries' input size)"
            )
        if context.shape[-1] != self.d_context:
            raise ValueError(
                f"context has embedding size {context.shape[-1]} but this CrossAttention was built "
                f"with d_context={self.d_context}: create it with d_context={context.shape[-1]} "
                "(the keys' and values' input size)"
            )
        if key_padding_mask is None:
            return
        if not isinstance(key_padding_mask, torch.Tensor) or key_padding_mask.dtype != torch.bool:
            kind = key_padding_mask.dtype if isinstance(key_padding_mask, torch.Tensor) else type(key_padding_mask).__name__
            raise TypeError(
                f"key_padding_mask must be a bool tensor (True = padding), got {kind}; "
                "build it with e.g. token_ids == pad_id"
            )
        expected = tuple(context.shape[:-1])  # (B, T_kv) or (T_kv,)
        if tuple(key_padding_mask.shape) != expected:
            raise ValueError(
                f"key_padding_mask has shape {tuple(key_padding_mask.shape)} but context has shape "
                f"{tuple(context.shape)}: the mask needs one entry per context token, shape {expected}"
            )

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
        self._check_inputs(x, context, key_padding_mask)
        queries = self.W_query(x)  # (B, T_q, d_out_kq)
        keys = self.W_key(context)  # (B, T_kv, d_out_kq)
        values = self.W_value(context)  # (B, T_kv, d_out_v)
        # (B, T_q, d_out_kq) @ (B, d_out_kq, T_kv) -> (B, T_q, T_kv): one row per query token
        scores = queries @ keys.transpose(-2, -1)
        scores = scores / keys.shape[-1] ** 0.5  # scale by sqrt(d_k) of *these* keys
        weights = padded_softmax(scores, key_padding_mask)  # each row sums to 1 (or is all 0)
        context_vectors = weights @ values  # (B, T_q, T_kv) @ (B, T_kv, d_out_v) -> (B, T_q, d_out_v)
        if return_weights:
            return context_vectors, weights
        return context_vectors
