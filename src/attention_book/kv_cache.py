"""KV caching for generation (chapter 10).

* :class:`KVCache` keeps the keys and values of the tokens generated so far, one
  ``(B, H, t, head_dim)`` tensor each, grown with ``torch.cat`` (readable: the chapter's version).
* :class:`StaticKVCache` is the same cache preallocated for ``max_tokens`` tokens: a step writes
  its keys and values in place instead of copying the whole cache into a new tensor, and its
  fixed-size buffers let a CUDA graph capture a decoding step.
* :class:`CachedMultiHeadAttention` is :class:`~attention_book.multihead.MultiHeadAttention`
  with an optional ``cache`` argument: it projects only the new tokens, appends their keys and
  values to the cache and lets the new queries attend to everything cached. ``forward`` checks its
  arguments once and calls :meth:`~CachedMultiHeadAttention.step`, the hot path without checks;
  :meth:`~CachedMultiHeadAttention.step_at` is the fixed-shape step a CUDA graph can replay, and
  :func:`capture_step` captures one.

Decoding one token at batch 1 does little arithmetic per operator, so on a GPU its time is the
fixed cost of each operator call (Python, argument checks, kernel launches): the cached paths
therefore use PyTorch's fused kernel (as :class:`~attention_book.fused.FusedMultiHeadAttention`)
and check arguments once per call, not once per operator. ``return_weights=True`` takes the
package's attention core (:func:`attention_book.functional.scaled_dot_product_attention`), which
returns the weights.
"""

from __future__ import annotations

from typing import Callable, Optional, Sequence, Tuple

import torch
import torch.nn.functional as F

from . import validation as check
from .functional import scaled_dot_product_attention
from .multihead import MultiHeadAttention, merge_heads, split_heads

__all__ = ["KVCache", "StaticKVCache", "CachedMultiHeadAttention", "AttentionStack", "capture_step"]

_SHAPE = "(B, H, t_new, head_dim)"


class KVCache:
    """The keys and values of the tokens seen so far, each ``(B, H, t, head_dim)``.

    Generation adds one token at a time; its query needs the keys and values of *all* earlier
    tokens, and with causal attention those never change. So each token's key and value are
    computed once and kept here.

    The cache stores them **detached** from the autograd graph: a cache lives for a whole
    generation, and keeping the graph of every step would make memory grow with each token
    even outside ``torch.no_grad()``. :meth:`append` still returns the new tokens' keys and
    values with their graph, so gradients reach the current step's projections.

    :meth:`append` checks its arguments, :meth:`extend` does the work without checks (for a
    caller that checked once, e.g. :meth:`CachedMultiHeadAttention.forward`). ``torch.cat``
    copies the whole cache into a new tensor at every step; :class:`StaticKVCache` writes in
    place.
    """

    def __init__(self):
        self.keys: Optional[torch.Tensor] = None
        self.values: Optional[torch.Tensor] = None

    def __len__(self) -> int:
        """Number of cached tokens."""
        return 0 if self.keys is None else self.keys.shape[-2]

    def __repr__(self) -> str:
        if self.keys is None:
            return f"{type(self).__name__}(empty)"
        return (f"{type(self).__name__}({len(self)} tokens, keys {tuple(self.keys.shape)}, "
                f"{self.keys.dtype}, {self.keys.device})")

    def check(self, keys: torch.Tensor, values: torch.Tensor) -> None:
        """Raise a clear error unless ``keys`` and ``values`` ``(B, H, t_new, hd)`` fit the cache."""
        check.floating_tensor("keys", keys, _SHAPE)
        check.floating_tensor("values", values, _SHAPE)
        check.ndim("keys", keys, 4, _SHAPE)
        check.ndim("values", values, 4, _SHAPE)
        check.same_dtype("values", values, "keys", keys)
        check.same_device("values", values, "keys", keys)
        if keys.shape != values.shape:
            raise ValueError(
                f"keys and values must have the same shape {_SHAPE}, got "
                f"{tuple(keys.shape)} and {tuple(values.shape)}; compute both "
                "from the same new tokens"
            )
        self.check_next(tuple(keys.shape), keys.dtype, keys.device)

    def check_next(self, shape: Tuple[int, ...], dtype: torch.dtype,
                   device: torch.device) -> None:
        """Raise a clear error unless new keys of ``shape`` ``(B, H, t_new, hd)``, ``dtype``
        and ``device`` can follow the cached ones."""
        if self.keys is None:
            return
        cached = self.keys
        if dtype != cached.dtype:
            raise TypeError(
                f"the new keys have dtype {dtype} but the cached keys have dtype "
                f"{cached.dtype}; convert the model or the inputs with .to({cached.dtype}), or "
                f"start a new {type(self).__name__}()"
            )
        if torch.device(device) != cached.device:
            raise ValueError(
                f"the new keys are on device {device} but the cached keys are on "
                f"{cached.device}; move them with .to({str(cached.device)!r}), or start a new "
                f"{type(self).__name__}()"
            )
        old = tuple(cached.shape)
        if old[:2] != tuple(shape[:2]) or old[-1] != shape[-1]:
            raise ValueError(
                f"the cache holds (B, H, t, hd) = {old} but the new keys "
                f"are {tuple(shape)}; batch size, heads and head_dim must stay the "
                f"same (start a new {type(self).__name__} for a new batch)"
            )

    def append(self, keys: torch.Tensor, values: torch.Tensor
               ) -> Tuple[torch.Tensor, torch.Tensor]:
        """Add the new tokens' ``keys`` and ``values`` ``(B, H, t_new, hd)``;
        return all of them, ``(B, H, t + t_new, hd)`` each."""
        self.check(keys, values)
        return self.extend(keys, values)

    def extend(self, keys: torch.Tensor, values: torch.Tensor
               ) -> Tuple[torch.Tensor, torch.Tensor]:
        """:meth:`append` without the checks."""
        if self.keys is None:
            all_keys, all_values = keys, values
        else:
            all_keys = torch.cat([self.keys, keys], dim=-2)  # (B, H, t + t_new, hd)
            all_values = torch.cat([self.values, values], dim=-2)
        self.keys, self.values = all_keys.detach(), all_values.detach()
        return all_keys, all_values

    def truncate(self, num_tokens: int) -> None:
        """Keep the first ``num_tokens`` tokens (forget the rest, e.g. a rejected draft)."""
        self._check_truncate(num_tokens)
        if self.keys is not None:
            self.keys = self.keys[..., :num_tokens, :]
            self.values = self.values[..., :num_tokens, :]

    def _check_truncate(self, num_tokens) -> None:
        if isinstance(num_tokens, bool) or not isinstance(num_tokens, int):
            raise TypeError(f"num_tokens must be an int, got {type(num_tokens).__name__} "
                            f"({num_tokens!r})")
        if not 0 <= num_tokens <= len(self):
            raise ValueError(f"num_tokens must be between 0 and len(cache) = {len(self)}, "
                             f"got {num_tokens}")


class StaticKVCache(KVCache):
    """A :class:`KVCache` preallocated for at most ``max_tokens`` tokens.

    The first :meth:`append` allocates a key buffer and a value buffer of
    ``(B, H, max_tokens, head_dim)`` (zeros); every later one writes the new tokens into them in
    place and returns views of the filled part. Reading ``cache.keys`` gives that view too. So a
    step copies only the new tokens (``torch.cat`` copies the whole cache), and the buffers keep
    their shape and address, which a CUDA graph needs (:meth:`CachedMultiHeadAttention.step_at`).

    Meant for inference (``torch.no_grad()``); with gradients on, :meth:`append` returns the new
    keys and values with their graph, as :class:`KVCache` does.
    """

    def __init__(self, max_tokens: int):
        self.max_tokens = check.positive_int("max_tokens", max_tokens)
        self.key_buffer: Optional[torch.Tensor] = None
        self.value_buffer: Optional[torch.Tensor] = None
        self.slots: Optional[torch.Tensor] = None
        self.length = 0

    @property
    def keys(self) -> Optional[torch.Tensor]:
        return None if self.key_buffer is None else self.key_buffer[:, :, :self.length]

    @property
    def values(self) -> Optional[torch.Tensor]:
        return None if self.value_buffer is None else self.value_buffer[:, :, :self.length]

    def __len__(self) -> int:
        return self.length

    def check_next(self, shape: Tuple[int, ...], dtype: torch.dtype,
                   device: torch.device) -> None:
        super().check_next(shape, dtype, device)
        if self.length + shape[-2] > self.max_tokens:
            raise ValueError(
                f"the cache holds {self.length} of at most max_tokens={self.max_tokens} tokens "
                f"and cannot take {shape[-2]} more; build StaticKVCache(max_tokens=...) "
                "for the longest sequence you will generate"
            )

    def allocate(self, like: torch.Tensor) -> None:
        """Allocate the buffers for tensors shaped and typed like ``like`` ``(B, H, t, hd)``."""
        batch_size, num_heads, _, head_dim = like.shape
        shape = (batch_size, num_heads, self.max_tokens, head_dim)
        self.key_buffer = torch.zeros(shape, dtype=like.dtype, device=like.device)
        self.value_buffer = torch.zeros_like(self.key_buffer)
        self.slots = torch.arange(self.max_tokens, device=like.device)  # position of each slot

    def extend(self, keys: torch.Tensor, values: torch.Tensor
               ) -> Tuple[torch.Tensor, torch.Tensor]:
        if self.key_buffer is None:
            self.allocate(keys)
        start, end = self.length, self.length + keys.shape[-2]
        self.key_buffer[:, :, start:end] = keys.detach()  # in place: no copy of the cache
        self.value_buffer[:, :, start:end] = values.detach()
        self.length = end
        if torch.is_grad_enabled() and (keys.requires_grad or values.requires_grad):
            # gradients reach this step's projections, as with KVCache
            return (torch.cat([self.key_buffer[:, :, :start], keys], dim=-2),
                    torch.cat([self.value_buffer[:, :, :start], values], dim=-2))
        return self.key_buffer[:, :, :end], self.value_buffer[:, :, :end]

    def truncate(self, num_tokens: int) -> None:
        self._check_truncate(num_tokens)
        self.length = num_tokens  # the rest is overwritten by the next append


class CachedMultiHeadAttention(MultiHeadAttention):
    """:class:`MultiHeadAttention` that can continue a sequence from a :class:`KVCache`.

    ``module(x)`` is the ordinary forward pass. ``module(x_new, cache=cache)`` treats
    ``x_new`` ``(B, t_new, d_in)`` as the tokens that follow the ``len(cache)`` tokens already
    cached: it projects only the new tokens, appends their keys and values to the cache, and
    lets the new queries attend to every cached key. Feeding a sequence piece by piece gives
    the outputs of one forward pass over the whole sequence (in eval mode).

    ``module(x_new, cache=cache)`` checks its arguments and the cache, then runs :meth:`step`,
    which does the work without checks: a decoding loop that checked its inputs once may call
    :meth:`step` directly in every layer. :meth:`step_at` is a step with fixed shapes for one
    token at a position given as a tensor, for CUDA graphs (:func:`capture_step`).
    """

    def forward(self, x: torch.Tensor, context=None, key_padding_mask=None,
                attn_mask=None, return_weights: bool = False,
                cache: Optional[KVCache] = None):
        if cache is None:  # the ordinary forward pass
            return super().forward(x, context, key_padding_mask, attn_mask,
                                   return_weights)
        self.check_step(x, cache, context, key_padding_mask, attn_mask)
        if check.boolean("return_weights", return_weights):
            return self._step_with_weights(x, cache)
        return self.step(x, cache)

    def check_step(self, x: torch.Tensor, cache: KVCache, context=None,
                   key_padding_mask=None, attn_mask=None) -> None:
        """Raise a clear error unless ``module(x, cache=cache)`` can run."""
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
        check.sequence_length("the cache plus x", len(cache) + x.shape[1],
                              self.context_length)
        weight = self.W_key.weight  # the new keys get its dtype and device
        cache.check_next((x.shape[0], self.num_heads, x.shape[1], self.head_dim),
                         weight.dtype, weight.device)

    def _project(self, x: torch.Tensor):
        """Queries, keys and values of ``x`` ``(B, t, d_in)``, each ``(B, H, t, hd)``."""
        B, T, H, hd = x.shape[0], x.shape[1], self.num_heads, self.head_dim
        return tuple(F.linear(x, layer.weight, layer.bias).view(B, T, H, hd).transpose(1, 2)
                     for layer in (self.W_query, self.W_key, self.W_value))

    def _output(self, context: torch.Tensor) -> torch.Tensor:
        B, H, T, hd = context.shape
        merged = context.transpose(1, 2).reshape(B, T, H * hd)  # (B, t, d_out)
        return F.linear(merged, self.out_proj.weight, self.out_proj.bias)

    def step(self, x: torch.Tensor, cache: KVCache) -> torch.Tensor:
        """The cached step without argument checks: ``x`` ``(B, t_new, d_in)`` follows the
        ``len(cache)`` cached tokens; returns ``(B, t_new, d_out)``.

        One new token sees every cached key, so it needs no mask; several new tokens need the
        last ``t_new`` rows of a causal mask over ``len(cache) + t_new`` tokens (the lower-right
        alignment; ``is_causal=True`` would align it to the upper left).
        """
        past, new = len(cache), x.shape[1]
        queries, keys, values = self._project(x)  # (B, H, t_new, hd) each
        keys, values = cache.extend(keys, values)  # (B, H, past + t_new, hd)
        if new == 1:
            allowed = None  # the newest token may see every key
        else:  # new token i sits at position past + i: it may see keys 0 .. past + i
            allowed = torch.ones(new, past + new, dtype=torch.bool,
                                 device=x.device).tril(past)
        dropout_p = self.dropout.p if self.training else 0.0
        context = F.scaled_dot_product_attention(queries, keys, values, attn_mask=allowed,
                                                 dropout_p=dropout_p)  # (B, H, t_new, hd)
        return self._output(context)

    def _step_with_weights(self, x: torch.Tensor, cache: KVCache):
        """:meth:`step` through the package's attention core, which returns the weights."""
        past, new = len(cache), x.shape[1]
        queries = split_heads(self.W_query(x), self.num_heads)  # (B, H, t_new, hd)
        keys, values = cache.extend(split_heads(self.W_key(x), self.num_heads),
                                    split_heads(self.W_value(x), self.num_heads))
        # the book's mask, True = hidden: key j > past + i is in query i's future
        hide = torch.ones(new, past + new, dtype=torch.bool, device=x.device).triu(past + 1)
        context, weights = scaled_dot_product_attention(
            queries, keys, values, mask=hide, dropout=self.dropout
        )  # (B, H, t_new, hd), (B, H, t_new, past + t_new)
        return self.out_proj(merge_heads(context)), weights

    def step_at(self, x: torch.Tensor, cache: StaticKVCache,
                position: torch.Tensor) -> torch.Tensor:
        """One new token per sequence, ``x`` ``(B, 1, d_in)``, at ``position`` (a ``(1,)``
        integer tensor on the device), with shapes that do not depend on the position: a CUDA
        graph can capture it once and replay it at every position (:func:`capture_step`).

        Writes the token's key and value into ``cache``'s buffers at ``position`` and attends
        over the *whole* buffer with a mask that hides the positions after it (the attention
        costs ``max_tokens`` keys instead of ``position + 1``, which at batch 1 is cheap next to
        the launches it saves). The buffers must exist (a prefill through :meth:`step` or
        ``forward`` allocates them); ``len(cache)`` is not advanced (the caller knows the
        position). No argument checks: this is the hot path.
        """
        queries, keys, values = self._project(x)  # (B, H, 1, hd) each
        cache.key_buffer.index_copy_(2, position, keys)
        cache.value_buffer.index_copy_(2, position, values)
        allowed = (cache.slots <= position).view(1, -1)  # (1, max_tokens): True = may attend
        context = F.scaled_dot_product_attention(queries, cache.key_buffer, cache.value_buffer,
                                                 attn_mask=allowed)  # (B, H, 1, hd)
        return self._output(context)


def capture_step(step: Callable[..., torch.Tensor], inputs: Sequence[torch.Tensor],
                 warmup: int = 3) -> Callable[..., torch.Tensor]:
    """Capture ``step(*inputs)`` as a CUDA graph; return ``replay(*new_inputs)``.

    A CUDA graph records the kernels one call launches and replays all of them with a single
    launch: the Python, the argument handling and the per-kernel launch cost of the eager call
    are gone. The price is fixed shapes and addresses: ``replay`` copies its arguments into the
    tensors the graph was captured with (same shapes) and returns the graph's output tensor,
    which the next replay overwrites (``.clone()`` it to keep it). Everything ``step`` reads
    besides its inputs (weights, a :class:`StaticKVCache`'s buffers) must stay where it is.

    ``inputs`` are CUDA tensors; ``step`` runs ``warmup`` times on a side stream before the
    capture (PyTorch's recipe: kernels pick their algorithms and workspaces outside the graph).
    """
    if not inputs or not all(isinstance(t, torch.Tensor) and t.is_cuda for t in inputs):
        raise ValueError("capture_step needs CUDA tensors as inputs (CUDA graphs exist only on "
                         "NVIDIA GPUs); on other devices call the step eagerly")
    static_inputs = [t.clone() for t in inputs]
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(warmup):
            step(*static_inputs)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_output = step(*static_inputs)

    def replay(*new_inputs: torch.Tensor) -> torch.Tensor:
        for static, new in zip(static_inputs, new_inputs):
            static.copy_(new)
        graph.replay()
        return static_output

    replay.graph = graph  # keep the graph (and its memory pool) alive with the function
    return replay


class AttentionStack(torch.nn.Module):
    """``num_layers`` :class:`CachedMultiHeadAttention` layers with residual connections: the
    attention part of a GPT (no MLP, no layer norm), for measuring a decoding step.

    * ``stack(x)``: the full forward pass, ``(B, T, width)`` -> ``(B, T, width)``;
    * ``stack(x, caches)``: the cached step through each layer's checked ``forward``;
    * ``stack.step(x, caches)``: the same after checking once (:meth:`check_step`), every
      layer's unchecked :meth:`CachedMultiHeadAttention.step`;
    * ``stack.step_at(x, caches, position)``: the fixed-shape step of
      :meth:`CachedMultiHeadAttention.step_at`, for :func:`capture_step`.
    """

    def __init__(self, width: int, num_heads: int, num_layers: int, context_length: int):
        super().__init__()
        check.positive_int("num_layers", num_layers)
        self.layers = torch.nn.ModuleList(
            CachedMultiHeadAttention(width, width, context_length, 0.0, num_heads)
            for _ in range(num_layers))

    def new_caches(self, static: bool = False) -> list:
        """One empty cache per layer: :class:`StaticKVCache` for the context length, or
        :class:`KVCache`."""
        length = self.layers[0].context_length
        return [StaticKVCache(length) if static else KVCache() for _ in self.layers]

    def forward(self, x: torch.Tensor, caches: Optional[list] = None) -> torch.Tensor:
        for index, layer in enumerate(self.layers):
            x = x + layer(x, cache=None if caches is None else caches[index])
        return x

    def check_step(self, x: torch.Tensor, caches: list) -> None:
        """The checks of a cached step, once for the whole stack."""
        if not isinstance(caches, (list, tuple)) or len(caches) != len(self.layers):
            raise ValueError(f"caches must be a list of {len(self.layers)} caches (one per "
                             f"layer), got {caches!r}; use stack.new_caches()")
        self.layers[0].check_step(x, caches[0])  # every layer has the same sizes
        if any(not isinstance(cache, KVCache) or len(cache) != len(caches[0])
               for cache in caches):
            raise ValueError(f"the caches hold {[len(c) for c in caches]} tokens: every layer's "
                             "cache must hold the same tokens; start again with new_caches()")

    def step(self, x: torch.Tensor, caches: list) -> torch.Tensor:
        """The cached step with the checks done once, before the first layer."""
        self.check_step(x, caches)
        for layer, cache in zip(self.layers, caches):
            x = x + layer.step(x, cache)
        return x

    def step_at(self, x: torch.Tensor, caches: list, position: torch.Tensor) -> torch.Tensor:
        """The fixed-shape step of one token at ``position`` (no checks at all)."""
        for layer, cache in zip(self.layers, caches):
            x = x + layer.step_at(x, cache, position)
        return x
