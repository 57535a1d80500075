"""KV caching for generation (chapter 10).

* :class:`KVCache` keeps the keys and values of the tokens generated so far, one
  ``(B, H, t, head_dim)`` tensor each.
* :class:`CachedMultiHeadAttention` is :class:`~attention_book.multihead.MultiHeadAttention`
  with an optional ``cache`` argument: it projects only the new tokens, appends their keys and
  values to the cache and lets the new queries attend to everything cached, through the
  package's attention core (:func:`attention_book.functional.scaled_dot_product_attention`).
"""

from __future__ import annotations

from typing import Optional, Tuple

import torch

from . import validation as check
from .functional import scaled_dot_product_attention
from .masks import causal_mask
from .multihead import MultiHeadAttention, merge_heads, split_heads

__all__ = ["KVCache", "CachedMultiHeadAttention"]


class KVCache:
    """The keys and values of the tokens seen so far, each ``(B, H, t, head_dim)``.

    Generation adds one token at a time; its query needs the keys and values of *all* earlier
    tokens, and with causal attention those never change. So each token's key and value are
    computed once and kept here.

    The cache stores them **detached** from the autograd graph: a cache lives for a whole
    generation, and keeping the graph of every step would make memory grow with each token
    even outside ``torch.no_grad()``. :meth:`append` still returns the new tokens' keys and
    values with their graph, so gradients reach the current step's projections.
    Real systems preallocate the cache for the longest sequence; ``torch.cat`` keeps this
    readable.
    """

    def __init__(self):
        self.keys: Optional[torch.Tensor] = None
        self.values: Optional[torch.Tensor] = None

    def __len__(self) -> int:
        """Number of cached tokens."""
        return 0 if self.keys is None else self.keys.shape[-2]

    def __repr__(self) -> str:
        if self.keys is None:
            return "KVCache(empty)"
        return (f"KVCache({len(self)} tokens, keys {tuple(self.keys.shape)}, "
                f"{self.keys.dtype}, {self.keys.device})")

    def append(self, keys: torch.Tensor, values: torch.Tensor
               ) -> Tuple[torch.Tensor, torch.Tensor]:
        """Add the new tokens' ``keys`` and ``values`` ``(B, H, t_new, hd)``;
        return all of them, ``(B, H, t + t_new, hd)`` each."""
        shape = "(B, H, t_new, head_dim)"
        check.floating_tensor("keys", keys, shape)
        check.floating_tensor("values", values, shape)
        check.ndim("keys", keys, 4, shape)
        check.ndim("values", values, 4, shape)
        check.same_dtype("values", values, "keys", keys)
        check.same_device("values", values, "keys", keys)
        if keys.shape != values.shape:
            raise ValueError(
                f"keys and values must have the same shape {shape}, got "
                f"{tuple(keys.shape)} and {tuple(values.shape)}; compute both "
                "from the same new tokens"
            )
        if self.keys is None:
            all_keys, all_values = keys, values
        else:
            check.same_dtype("keys", keys, "the cached keys", self.keys)
            check.same_device("keys", keys, "the cached keys", self.keys)
            old, new = tuple(self.keys.shape), tuple(keys.shape)
            if old[:2] != new[:2] or old[-1] != new[-1]:
                raise ValueError(
                    f"the cache holds (B, H, t, hd) = {old} but the new keys "
                    f"are {new}; batch size, heads and head_dim must stay the "
                    "same (start a new KVCache() for a new batch)"
                )
            all_keys = torch.cat([self.keys, keys], dim=-2)  # (B, H, t + t_new, hd)
            all_values = torch.cat([self.values, values], dim=-2)
        self.keys, self.values = all_keys.detach(), all_values.detach()
        return all_keys, all_values


class CachedMultiHeadAttention(MultiHeadAttention):
    """:class:`MultiHeadAttention` that can continue a sequence from a :class:`KVCache`.

    ``module(x)`` is the ordinary forward pass. ``module(x_new, cache=cache)`` treats
    ``x_new`` ``(B, t_new, d_in)`` as the tokens that follow the ``len(cache)`` tokens already
    cached: it projects only the new tokens, appends their keys and values to the cache, and
    lets the new queries attend to every cached key. Feeding a sequence piece by piece gives
    the outputs of one forward pass over the whole sequence (in eval mode).
    """

    def forward(self, x: torch.Tensor, context=None, key_padding_mask=None,
                attn_mask=None, return_weights: bool = False,
                cache: Optional[KVCache] = None):
        if cache is None:  # the ordinary forward pass
            return super().forward(x, context, key_padding_mask, attn_mask,
                                   return_weights)
        if not isinstance(cache, KVCache):
            raise TypeError(
                f"cache must be a KVCache, got {type(cache).__name__}; "
                "start one with cache = KVCache()"
            )
        check.unsupported(
            "the cached path (causal self-attention only)",
            "call module(x, ...) without cache= to use it",
            context=context, key_padding_mask=key_padding_mask, attn_mask=attn_mask)
        if not self.causal:
            raise ValueError(
                "a KV cache needs causal=True: with bidirectional attention "
                "every earlier token would have to attend to the new ones "
                "too, so nothing could be reused; run module(x) instead"
            )
        self.check_inputs(x)  # MultiHeadAttention's checks of x
        past, new = len(cache), x.shape[1]
        check.sequence_length("the cache plus x", past + new,
                              self.context_length)
        H = self.num_heads
        queries = split_heads(self.W_query(x), H)  # (B, H, t_new, hd)
        keys, values = cache.append(split_heads(self.W_key(x), H),
                                    split_heads(self.W_value(x), H))
        # New token i sits at position past + i: the last t_new rows of the
        # causal mask of past + t_new tokens (aligned to the lower right).
        hide = causal_mask(past + new, device=x.device)[past:]  # (t_new, past + t_new)
        context, weights = scaled_dot_product_attention(
            queries, keys, values, mask=hide, dropout=self.dropout
        )  # (B, H, t_new, hd), (B, H, t_new, past + t_new)
        output = self.out_proj(merge_heads(context))  # (B, t_new, d_out)
        return (output, weights) if return_weights else output
