"""Grouped-query attention, with rotary positions and a KV cache (chapter 10).

Multi-head attention gives every head its own keys and values. While generating, those keys and
values are what a KV cache stores and what every new token must read back, so they set both the
memory of the cache and the time of a decoding step. Two ways to share them:

* **multi-query attention** (MQA, Shazeer 2019): all query heads share *one* key head and one
  value head;
* **grouped-query attention** (GQA, Ainslie et al. 2023): the ``num_heads`` query heads form
  ``num_kv_heads`` groups, and each group shares a key head and a value head.

``num_kv_heads = num_heads`` is ordinary multi-head attention, ``num_kv_heads = 1`` is MQA; the
cache shrinks by the factor ``num_heads / num_kv_heads``.

* :func:`repeat_kv` - ``(B, H_kv, T, hd)`` -> ``(B, H_kv * groups, T, hd)``: each key/value head
  repeated for the query heads of its group (what the attention then reads);
* :class:`GroupedQueryAttention` - ``(B, T, d_in)`` -> ``(B, T, d_out)``; optional rotary
  position embeddings (:mod:`attention_book.positions`) and an optional
  :class:`~attention_book.kv_cache.KVCache` that holds only the ``num_kv_heads`` heads.

The attention itself is the book's core, :func:`attention_book.functional.scaled_dot_product_attention`.
"""

from __future__ import annotations

from typing import Optional, Tuple, Union

import torch
from torch import nn

from . import validation as check
from .functional import scaled_dot_product_attention
from .kv_cache import KVCache
from .masks import causal_mask, combine_masks, padding_mask
from .multihead import MultiHeadAttention, merge_heads, split_heads
from .positions import ROPE_BASE, apply_rope

__all__ = ["repeat_kv", "GroupedQueryAttention"]


def repeat_kv(keys_or_values: torch.Tensor, groups: int) -> torch.Tensor:
    """``(B, H_kv, T, hd)`` -> ``(B, H_kv * groups, T, hd)``: head ``j`` of the result is head
    ``j // groups`` of the input, so query heads ``g * groups .. (g + 1) * groups - 1`` all read
    key/value head ``g``. ``groups = 1`` returns the input unchanged."""
    check.floating_tensor("keys_or_values", keys_or_values, "(B, H_kv, T, head_dim)")
    check.ndim("keys_or_values", keys_or_values, 4, "(B, H_kv, T, head_dim)")
    groups = check.positive_int("groups", groups)
    if groups == 1:
        return keys_or_values
    return keys_or_values.repeat_interleave(groups, dim=1)  # (B, H_kv * groups, T, hd)


class GroupedQueryAttention(nn.Module):
    """Grouped-query self-attention: ``num_heads`` query heads share ``num_kv_heads`` key and
    value heads.

    Args:
        d_in, d_out, context_length, dropout, num_heads, qkv_bias, causal: as in
            :class:`~attention_book.multihead.MultiHeadAttention` (``head_dim = d_out // num_heads``).
        num_kv_heads: number of key/value heads; must divide ``num_heads``. Default
            ``num_heads`` (multi-head attention); 1 is multi-query attention.
        rope: rotate queries and keys by their positions (:func:`attention_book.positions.apply_rope`).
        rope_base: the base of the rotary angles.

    Parameters: ``W_query`` ``(d_in -> d_out)``, ``W_key`` and ``W_value``
    ``(d_in -> num_kv_heads * head_dim)``, ``out_proj`` ``(d_out -> d_out)``, named as in
    :class:`MultiHeadAttention`; with ``num_kv_heads = num_heads`` a ``MultiHeadAttention``
    ``state_dict`` loads unchanged (:meth:`from_multihead`) and the outputs are the same.
    """

    def __init__(self, d_in: int, d_out: int, context_length: int, dropout: float, num_heads: int,
                 num_kv_heads: Optional[int] = None, qkv_bias: bool = False, causal: bool = True,
                 rope: bool = False, rope_base: float = ROPE_BASE):
        super().__init__()
        # the arguments it shares with MultiHeadAttention, checked the same way (sizes, dropout, divisibility)
        for name, value in (("d_in", d_in), ("d_out", d_out), ("context_length", context_length),
                            ("num_heads", num_heads)):
            check.positive_int(name, value)
        check.probability("dropout", dropout)
        self.qkv_bias = check.boolean("qkv_bias", qkv_bias)
        self.causal = check.boolean("causal", causal)
        self.rope = check.boolean("rope", rope)
        self.rope_base = check.positive_number("rope_base", rope_base)
        if d_out % num_heads:
            divisors = tuple(k for k in range(1, d_out + 1) if d_out % k == 0)
            raise ValueError(
                f"d_out={d_out} is not divisible by num_heads={num_heads}: choose num_heads from {divisors}"
            )
        num_kv_heads = num_heads if num_kv_heads is None else check.positive_int("num_kv_heads", num_kv_heads)
        if num_heads % num_kv_heads:
            divisors = tuple(k for k in range(1, num_heads + 1) if num_heads % k == 0)
            raise ValueError(
                f"num_kv_heads={num_kv_heads} does not divide num_heads={num_heads}: every group of "
                f"query heads needs the same size; choose num_kv_heads from {divisors}"
            )
        self.d_in, self.d_out, self.context_length = d_in, d_out, context_length
        self.num_heads, self.num_kv_heads = num_heads, num_kv_heads
        self.head_dim = d_out // num_heads
        if rope and self.head_dim % 2:
            raise ValueError(
                f"rope=True needs an even head_dim, got d_out // num_heads = {self.head_dim}: RoPE turns "
                "numbers in pairs; change d_out or num_heads"
            )
        kv_width = num_kv_heads * self.head_dim  # the keys and values of all groups
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, kv_width, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, kv_width, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)
        self.dropout = nn.Dropout(dropout)

    @property
    def groups(self) -> int:
        """Query heads per key/value head."""
        return self.num_heads // self.num_kv_heads

    @classmethod
    def from_multihead(cls, module: MultiHeadAttention, rope: bool = False) -> "GroupedQueryAttention":
        """A ``GroupedQueryAttention`` with ``num_kv_heads = num_heads`` and ``module``'s weights
        (self-attention modules only)."""
        if not isinstance(module, MultiHeadAttention):
            raise TypeError(f"module must be a MultiHeadAttention, got {type(module).__name__}")
        if module.kdim != module.d_in:
            raise ValueError("module is a cross-attention module (kdim != d_in); GroupedQueryAttention "
                             "does self-attention only")
        copy = cls(module.d_in, module.d_out, module.context_length, module.dropout.p, module.num_heads,
                   qkv_bias=module.W_query.bias is not None, causal=module.causal, rope=rope)
        weight = module.out_proj.weight
        copy.to(weight.device, weight.dtype)
        state = {name: tensor for name, tensor in module.state_dict().items() if name != "mask"}
        copy.load_state_dict(state)
        return copy.train(module.training)

    def forward(self, x: torch.Tensor, key_padding_mask: Optional[torch.Tensor] = None,
                positions: Optional[torch.Tensor] = None, cache: Optional[KVCache] = None,
                return_weights: bool = False) -> Union[torch.Tensor, Tuple[torch.Tensor, torch.Tensor]]:
        """``x`` ``(B, T_new, d_in)`` -> ``(B, T_new, d_out)``.

        Args:
            x: the new tokens. Without ``cache`` they are the whole sequence.
            key_padding_mask: optional bool ``(B, len(cache) + T_new)``, ``True`` at padding (it
                covers the cached tokens too).
            positions: the tokens' positions for RoPE, ``(T_new,)`` or ``(B, T_new)``; default
                ``len(cache) + 0 .. T_new - 1``, so a cached sequence continues where it stopped.
                With left padding pass :func:`~attention_book.positions.positions_from_padding`.
            cache: a :class:`KVCache`: the new keys and values (``num_kv_heads`` heads, rotated if
                ``rope``) are appended and the new queries attend to everything cached.
            return_weights: also return the weights ``(B, num_heads, T_new, len(cache) + T_new)``.
        """
        shape = f"(B, T, d_in) = (B, T, {self.d_in})"
        check.floating_tensor("x", x, shape)
        check.ndim("x", x, 3, shape)
        check.last_dim("x", x, self.d_in, "d_in")
        check.same_dtype("x", x, "the weights", self.W_query.weight)
        check.same_device("x", x, "the weights", self.W_query.weight)
        check.boolean("return_weights", return_weights)
        if cache is not None and not isinstance(cache, KVCache):
            raise TypeError(f"cache must be a KVCache, got {type(cache).__name__}; start one with KVCache()")
        if cache is not None and not self.causal:
            raise ValueError("a KV cache needs causal=True: with bidirectional attention earlier tokens "
                             "would have to see the new ones; call the module without cache=")
        past = 0 if cache is None else len(cache)
        batch_size, num_new = x.shape[0], x.shape[1]
        check.sequence_length("the cache plus x", past + num_new, self.context_length)
        if positions is None:
            positions = torch.arange(past, past + num_new, device=x.device)  # continue after the cache
        elif not self.rope:
            raise ValueError("positions only matter with rope=True; build the module with rope=True "
                             "or leave positions out")
        if key_padding_mask is not None:
            check.bool_mask("key_padding_mask", key_padding_mask, None, meaning="True = padding")
            if tuple(key_padding_mask.shape) != (batch_size, past + num_new):
                raise ValueError(
                    f"key_padding_mask has shape {tuple(key_padding_mask.shape)} but the keys are the "
                    f"{past} cached and {num_new} new tokens of {batch_size} sequences: give it shape "
                    f"(B, len(cache) + T_new) = {(batch_size, past + num_new)}"
                )

        queries = split_heads(self.W_query(x), self.num_heads)  # (B, H, T_new, hd)
        keys = split_heads(self.W_key(x), self.num_kv_heads)  # (B, H_kv, T_new, hd)
        values = split_heads(self.W_value(x), self.num_kv_heads)  # (B, H_kv, T_new, hd)
        if self.rope:  # rotate before caching: a cached key keeps the angle of its position
            queries = apply_rope(queries, positions, self.rope_base)
            keys = apply_rope(keys, positions, self.rope_base)
        if cache is not None:
            keys, values = cache.append(keys, values)  # (B, H_kv, past + T_new, hd): only H_kv heads
        keys = repeat_kv(keys, self.groups)  # (B, H, past + T_new, hd)
        values = repeat_kv(values, self.groups)

        # new token i sits at position past + i: the last T_new rows of the causal mask
        future = causal_mask(past + num_new, device=x.device)[past:] if self.causal else None
        padded = None if key_padding_mask is None else padding_mask(key_padding_mask, num_query_dims=2)
        context, weights = scaled_dot_product_attention(
            queries, keys, values, mask=combine_masks(future, padded), dropout=self.dropout
        )  # (B, H, T_new, hd), (B, H, T_new, past + T_new)
        output = self.out_proj(merge_heads(context))  # (B, T_new, d_out)
        return (output, weights) if return_weights else output

    def extra_repr(self) -> str:
        return (f"num_heads={self.num_heads}, num_kv_heads={self.num_kv_heads}, head_dim={self.head_dim}, "
                f"causal={self.causal}, rope={self.rope}")
