"""Attention at scale (chapter 9): fused kernels, cost models, timing and memory, KV caching.

* :class:`FusedMultiHeadAttention` is chapter 5's :class:`~attention_book.multihead.MultiHeadAttention`
  with the attention core replaced by PyTorch's fused
  :func:`torch.nn.functional.scaled_dot_product_attention`. Same parameters, same ``state_dict``,
  same outputs (in eval mode, or with ``dropout=0``); it never builds the ``(T, T)`` weights.
* :func:`direct_sdpa` runs the same projections and the fused kernel with no module around them:
  the reference for measuring the module's overhead.
* :func:`attention_flops` and :func:`score_matrix_bytes` are the cost model: time grows with
  ``T^2 * d``, the weights' memory with ``T^2``.
* :func:`time_call`, :func:`peak_memory` and :func:`matmul_gflops` measure on CPU or GPU.
* :class:`KVCache` and :class:`CachedMultiHeadAttention` show incremental decoding: each new token
  attends to the cached keys and values of the earlier tokens instead of recomputing them.
"""

from __future__ import annotations

import math
import statistics
import time
from typing import Callable, List, Optional, Sequence, Tuple

import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from .multihead import MultiHeadAttention, _check_input

__all__ = [
    "FusedMultiHeadAttention",
    "direct_sdpa",
    "attention_flops",
    "score_matrix_bytes",
    "time_call",
    "peak_memory",
    "matmul_gflops",
    "KVCache",
    "CachedMultiHeadAttention",
    "IMPLEMENTATIONS",
    "attention_implementations",
    "naive_causal_attention",
    "benchmark_attention",
    "sweep",
    "markdown_table",
    "benchmark_table",
    "Table",
]


# --------------------------------------------------------------------------------------------
# The fused path
# --------------------------------------------------------------------------------------------


def _split_heads(tensor: torch.Tensor, num_heads: int) -> torch.Tensor:
    """(B, T, d_out) -> (B, H, T, head_dim)."""
    batch_size, num_tokens, d_out = tensor.shape
    return tensor.view(batch_size, num_tokens, num_heads, d_out // num_heads).transpose(1, 2)


def _merge_heads(tensor: torch.Tensor) -> torch.Tensor:
    """(B, H, T, head_dim) -> (B, T, H * head_dim), heads side by side."""
    batch_size, num_heads, num_tokens, head_dim = tensor.shape
    return tensor.transpose(1, 2).contiguous().view(batch_size, num_tokens, num_heads * head_dim)


class FusedMultiHeadAttention(MultiHeadAttention):
    """:class:`~attention_book.multihead.MultiHeadAttention` computed by a fused kernel.

    Constructor, parameters (``W_query``, ``W_key``, ``W_value``, ``out_proj``) and ``state_dict``
    are those of :class:`MultiHeadAttention`, so weights move between the two with
    ``load_state_dict`` (or :meth:`from_module`). The forward pass calls
    :func:`torch.nn.functional.scaled_dot_product_attention` with ``is_causal=self.causal``:
    PyTorch picks the fastest kernel for the device (FlashAttention, memory-efficient, cuDNN or
    the plain "math" fallback), and no ``(B, H, T, T)`` weight matrix is kept.

    With dropout switched off (``dropout=0.0`` or ``module.eval()``) it returns the same numbers
    as :class:`MultiHeadAttention` up to float rounding. In training mode with ``dropout > 0``
    both drop weights at random, but the fused kernel draws its random numbers differently, so
    the two do not drop the same weights even with the same seed.
    """

    @classmethod
    def from_module(cls, module: MultiHeadAttention) -> "FusedMultiHeadAttention":
        """A fused copy of ``module`` (same configuration, weights, device and train/eval mode)."""
        if not isinstance(module, MultiHeadAttention):
            raise TypeError(
                f"from_module expects a MultiHeadAttention, got {type(module).__name__}; "
                "build one with MultiHeadAttention(d_in, d_out, context_length, dropout, num_heads)"
            )
        fused = cls(module.d_in, module.d_out, module.context_length, module.dropout.p,
                    module.num_heads, qkv_bias=module.W_query.bias is not None, causal=module.causal)
        fused.load_state_dict(module.state_dict())
        fused.to(module.out_proj.weight.device, module.out_proj.weight.dtype)
        return fused.train(module.training)

    def forward(self, x: torch.Tensor, return_weights: bool = False) -> torch.Tensor:
        """``(B, T, d_in)`` -> ``(B, T, d_out)``, attention by the fused kernel."""
        if return_weights:
            raise ValueError(
                "the fused kernel never builds the attention weights, so return_weights=True is "
                "not available; to look at the weights, run MultiHeadAttention with the same "
                "state_dict (module.load_state_dict(fused.state_dict()))"
            )
        _check_input(x, self.d_in, self.context_length)
        queries = _split_heads(self.W_query(x), self.num_heads)  # (B, H, T, hd)
        keys = _split_heads(self.W_key(x), self.num_heads)  # (B, H, T, hd)
        values = _split_heads(self.W_value(x), self.num_heads)  # (B, H, T, hd)
        dropout_p = self.dropout.p if self.training else 0.0  # nn.Dropout is a no-op in eval mode
        context = F.scaled_dot_product_attention(  # scales by 1/sqrt(hd), masks, softmax, @ V
            queries, keys, values, dropout_p=dropout_p, is_causal=self.causal
        )  # (B, H, T, hd)
        return self.out_proj(_merge_heads(context))  # (B, T, d_out)


def direct_sdpa(module: MultiHeadAttention, x: torch.Tensor) -> torch.Tensor:
    """``module``'s projections and the fused kernel, with no checks or module call around them.

    The reference for the overhead of :class:`FusedMultiHeadAttention` (no dropout).
    """
    H = module.num_heads
    queries = _split_heads(F.linear(x, module.W_query.weight, module.W_query.bias), H)
    keys = _split_heads(F.linear(x, module.W_key.weight, module.W_key.bias), H)
    values = _split_heads(F.linear(x, module.W_value.weight, module.W_value.bias), H)
    context = F.scaled_dot_product_attention(queries, keys, values, is_causal=module.causal)
    return F.linear(_merge_heads(context), module.out_proj.weight, module.out_proj.bias)


# --------------------------------------------------------------------------------------------
# Cost model
# --------------------------------------------------------------------------------------------


def _check_count(name: str, value) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {type(value).__name__} ({value!r})")
    if value < 1:
        raise ValueError(f"{name} must be at least 1, got {value}")


def attention_flops(batch_size: int, num_tokens: int, d_model: int, num_heads: int,
                    causal: bool = False, projections: bool = True) -> int:
    """Floating-point operations of one multi-head self-attention forward pass.

    Counts the matrix products only (softmax, scaling and masking are ``O(T^2)`` element-wise work,
    a small fraction), at 2 FLOPs per multiply-add, for ``d_in = d_out = d_model``:

    * projections: ``W_query``, ``W_key``, ``W_value`` and ``out_proj``, each ``2 * B * T * d^2``;
    * scores ``Q K^T`` and context ``A V``: each ``2 * B * T^2 * d`` summed over the heads
      (``H`` heads of ``d / H`` columns do the work of one head of ``d`` columns).

    With ``causal=True`` only the ``T (T + 1) / 2`` visible (query, key) pairs are counted: the
    work a kernel that skips the hidden half must do. ``projections=False`` gives the attention
    core alone. A backward pass costs about twice the forward pass.
    """
    for name, value in (("batch_size", batch_size), ("num_tokens", num_tokens),
                        ("d_model", d_model), ("num_heads", num_heads)):
        _check_count(name, value)
    if d_model % num_heads:
        raise ValueError(
            f"d_model={d_model} is not divisible by num_heads={num_heads}: every head gets "
            f"d_model // num_heads columns; choose num_heads from "
            f"{tuple(k for k in range(1, d_model + 1) if d_model % k == 0)}"
        )
    pairs = num_tokens * (num_tokens + 1) // 2 if causal else num_tokens * num_tokens
    core = 2 * (2 * batch_size * pairs * d_model)  # Q K^T and A V
    projection = 4 * (2 * batch_size * num_tokens * d_model * d_model) if projections else 0
    return core + projection


def score_matrix_bytes(batch_size: int, num_tokens: int, num_heads: int,
                       dtype: torch.dtype = torch.float32) -> int:
    """Bytes of one ``(B, H, T, T)`` tensor of attention scores (or weights) in ``dtype``."""
    for name, value in (("batch_size", batch_size), ("num_tokens", num_tokens),
                        ("num_heads", num_heads)):
        _check_count(name, value)
    if not isinstance(dtype, torch.dtype):
        raise TypeError(f"dtype must be a torch.dtype such as torch.float32, got {dtype!r}")
    element_size = torch.empty((), dtype=dtype).element_size()
    return batch_size * num_heads * num_tokens * num_tokens * element_size


# --------------------------------------------------------------------------------------------
# Measuring
# --------------------------------------------------------------------------------------------


def _synchronize(device: Optional[torch.device]) -> None:
    if device is not None and torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


def time_call(fn: Callable[[], object], repeats: int = 5, warmup: int = 1,
              device: Optional[torch.device] = None, statistic: str = "median") -> float:
    """Wall-clock seconds of ``fn()``: the median (or ``statistic="min"``) of ``repeats`` calls,
    after ``warmup`` calls that are not timed.

    GPU work is asynchronous: pass ``device`` so the clock waits for CUDA kernels to finish.
    The median resists the odd slow call (another program, a garbage collection); on a busy
    shared machine the minimum is the better estimate of what the code itself costs.
    """
    if statistic not in ("median", "min"):
        raise ValueError(f"statistic must be 'median' or 'min', got {statistic!r}")
    if not callable(fn):
        raise TypeError(f"fn must be a function without arguments, e.g. lambda: module(x); got {fn!r}")
    _check_count("repeats", repeats)
    if isinstance(warmup, bool) or not isinstance(warmup, int) or warmup < 0:
        raise ValueError(f"warmup must be an int >= 0, got {warmup!r}")
    for _ in range(warmup):  # first calls pay for allocations, kernel selection, caches
        fn()
    _synchronize(device)
    seconds: List[float] = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        _synchronize(device)
        seconds.append(time.perf_counter() - start)
    return statistics.median(seconds) if statistic == "median" else min(seconds)


class _TensorMemoryTracker(TorchDispatchMode):
    """Counts the bytes of the tensors PyTorch operators create, and their peak.

    Every operator call passes through ``__torch_dispatch__``; new storages among its outputs are
    recorded with a weak reference, and storages whose tensors were all freed are subtracted
    before the next call. Scratch buffers a kernel allocates and frees inside one call are not
    seen (for the CPU fused kernels these are small per-thread blocks).
    """

    def __init__(self):
        super().__init__()
        from torch.multiprocessing.reductions import StorageWeakRef

        self._weakref = StorageWeakRef
        self.live: dict = {}  # storage key -> (weak ref, bytes)
        self.current = 0
        self.peak = 0

    def _release_freed(self) -> None:
        for key, (ref, nbytes) in list(self.live.items()):
            if ref.expired():
                self.current -= nbytes
                del self.live[key]

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self._release_freed()
        kwargs = kwargs or {}
        inputs = {leaf.untyped_storage().data_ptr()
                  for leaf in tree_leaves((args, kwargs))
                  if isinstance(leaf, torch.Tensor) and leaf.device.type != "meta"}
        out = func(*args, **kwargs)
        for tensor in tree_leaves(out):
            if isinstance(tensor, torch.Tensor) and tensor.device.type != "meta":
                storage = tensor.untyped_storage()
                key = storage.data_ptr()
                if key in self.live or key in inputs or storage.nbytes() == 0:
                    continue  # a view of memory that is already counted or existed before
                self.live[key] = (self._weakref(storage), storage.nbytes())
                self.current += storage.nbytes()
        self.peak = max(self.peak, self.current)
        return out


def peak_memory(fn: Callable[[], object], device: Optional[torch.device] = None) -> int:
    """Peak bytes of tensor memory allocated while ``fn()`` runs (beyond what existed before).

    On CUDA this is ``torch.cuda.max_memory_allocated`` (exact, including kernel scratch space).
    On other devices it counts the tensors created by PyTorch operators (including the ones kept
    for the backward pass); scratch space inside a single kernel call is not counted.
    """
    if not callable(fn):
        raise TypeError(f"fn must be a function without arguments, e.g. lambda: module(x); got {fn!r}")
    if device is not None and torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        before = torch.cuda.memory_allocated(device)
        fn()
        torch.cuda.synchronize(device)
        return torch.cuda.max_memory_allocated(device) - before
    with _TensorMemoryTracker() as tracker:
        result = fn()  # keep the result alive until the tracker has seen every operator
    del result
    return tracker.peak


def matmul_gflops(size: int = 1024, repeats: int = 5, device: Optional[torch.device] = None,
                  dtype: torch.dtype = torch.float32) -> float:
    """Measured GFLOP/s of a ``(size, size) @ (size, size)`` product: the practical speed limit.

    Attention is mostly matrix products, so no attention implementation on this device can run
    much faster than this (in FLOPs per second).
    """
    _check_count("size", size)
    a = torch.randn(size, size, device=device, dtype=dtype)
    b = torch.randn(size, size, device=device, dtype=dtype)
    seconds = time_call(lambda: a @ b, repeats=repeats, warmup=2, device=device)
    return 2 * size**3 / seconds / 1e9


# --------------------------------------------------------------------------------------------
# KV caching for generation
# --------------------------------------------------------------------------------------------


class KVCache:
    """The keys and values of the tokens seen so far, each ``(B, H, t, head_dim)``.

    Generation adds one token at a time; its query needs the keys and values of *all* earlier
    tokens, and those never change (causal attention: a token's key and value depend only on the
    token itself). So we compute each token's key and value once and keep them here.
    Real systems preallocate the cache for the longest sequence; ``torch.cat`` keeps this readable.
    """

    def __init__(self):
        self.keys: Optional[torch.Tensor] = None
        self.values: Optional[torch.Tensor] = None

    def __len__(self) -> int:
        """Number of cached tokens."""
        return 0 if self.keys is None else self.keys.shape[-2]

    def append(self, keys: torch.Tensor, values: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        """Add the new tokens' ``keys`` and ``values`` (B, H, t_new, hd); return all of them."""
        if keys.ndim != 4 or keys.shape != values.shape:
            raise ValueError(
                f"keys and values must both be (B, H, t_new, head_dim), got {tuple(keys.shape)} and "
                f"{tuple(values.shape)}; split the heads first, e.g. k.view(B, T, H, hd).transpose(1, 2)"
            )
        if self.keys is None:
            self.keys, self.values = keys, values
        else:
            if keys.shape[:2] != self.keys.shape[:2] or keys.shape[-1] != self.keys.shape[-1]:
                raise ValueError(
                    f"the cache holds (B, H, t, hd) = {tuple(self.keys.shape)} but the new keys are "
                    f"{tuple(keys.shape)}; batch size, heads and head_dim must stay the same "
                    "(start a new KVCache() for a new batch)"
                )
            self.keys = torch.cat([self.keys, keys], dim=-2)  # (B, H, t + t_new, hd)
            self.values = torch.cat([self.values, values], dim=-2)
        return self.keys, self.values


class CachedMultiHeadAttention(MultiHeadAttention):
    """:class:`MultiHeadAttention` that can continue a sequence from a :class:`KVCache`.

    ``module(x)`` is the ordinary forward pass. ``module(x_new, cache=cache)`` treats ``x_new``
    ``(B, t_new, d_in)`` as the tokens that follow the ``len(cache)`` tokens already in the cache:
    it projects only the new tokens, appends their keys and values to the cache, and lets the new
    queries attend to every cached key. Feeding a sequence piece by piece gives the same outputs
    as one forward pass over the whole sequence (in eval mode).
    """

    def forward(self, x: torch.Tensor, return_weights: bool = False,
                cache: Optional[KVCache] = None):
        if cache is None:
            return super().forward(x, return_weights=return_weights)
        if not isinstance(cache, KVCache):
            raise TypeError(f"cache must be a KVCache, got {type(cache).__name__}")
        if not self.causal:
            raise ValueError(
                "a KV cache needs causal=True: with bidirectional attention every earlier token "
                "would have to attend to the new ones too, so nothing could be reused; run the "
                "whole sequence with module(x) instead"
            )
        past = len(cache)
        if x.ndim == 3 and past + x.shape[1] > self.context_length:
            raise ValueError(
                f"the cache holds {past} tokens and {x.shape[1]} more arrive, but this module was "
                f"built with context_length={self.context_length}; start a new cache or build the "
                f"module with context_length >= {past + x.shape[1]}"
            )
        _check_input(x, self.d_in, self.context_length)
        new = x.shape[1]
        queries = _split_heads(self.W_query(x), self.num_heads)  # (B, H, t_new, hd)
        keys, values = cache.append(_split_heads(self.W_key(x), self.num_heads),
                                    _split_heads(self.W_value(x), self.num_heads))  # (B, H, past+t_new, hd)
        scores = queries @ keys.transpose(2, 3)  # (B, H, t_new, past + t_new)
        if self.causal:  # new token i sits at position past + i: rows past..past+t_new of the mask
            scores = scores.masked_fill(self.mask[past:past + new, :past + new], float("-inf"))
        weights = self.dropout(torch.softmax(scores / math.sqrt(self.head_dim), dim=-1))
        output = self.out_proj(_merge_heads(weights @ values))  # (B, t_new, d_out)
        return (output, weights) if return_weights else output


# --------------------------------------------------------------------------------------------
# Side-by-side benchmark (used by the chapter and by tools/bench_scale.py)
# --------------------------------------------------------------------------------------------

#: the implementations :func:`attention_implementations` builds, slowest first
IMPLEMENTATIONS = ("wrapper (one head at a time)", "MultiHeadAttention (weight split)",
                   "FusedMultiHeadAttention", "direct SDPA (no module)", "torch.nn.MultiheadAttention")


def attention_implementations(d_model: int, num_heads: int, context_length: int,
                              device: Optional[torch.device] = None, seed: int = 0) -> dict:
    """Causal self-attention five ways, as ``name -> function(x)`` for ``x`` ``(B, T, d_model)``.

    All but the wrapper share one set of weights (the wrapper has no output projection), so
    their outputs agree; dropout is off. The names are :data:`IMPLEMENTATIONS`.
    """
    from torch import nn

    from .multihead import MultiHeadAttentionWrapper

    torch.manual_seed(seed)
    wrapper = MultiHeadAttentionWrapper(d_model, d_model, context_length, 0.0, num_heads).to(device)
    scratch = MultiHeadAttention(d_model, d_model, context_length, 0.0, num_heads).to(device)
    fused = FusedMultiHeadAttention.from_module(scratch)
    reference = nn.MultiheadAttention(d_model, num_heads, batch_first=True, device=device)
    with torch.no_grad():  # same weights as `scratch`: in_proj stacks W_query, W_key, W_value
        reference.in_proj_weight.copy_(torch.cat([scratch.W_query.weight, scratch.W_key.weight,
                                                  scratch.W_value.weight]))
        reference.in_proj_bias.zero_()
        reference.out_proj.load_state_dict(scratch.out_proj.state_dict())
    masks: dict = {}

    def torch_mha(x):
        T = x.shape[1]
        if T not in masks:  # nn.MultiheadAttention wants the mask; is_causal=True is a hint
            masks[T] = torch.triu(torch.ones(T, T, dtype=torch.bool, device=x.device), diagonal=1)
        return reference(x, x, x, attn_mask=masks[T], is_causal=True, need_weights=False)[0]

    return dict(zip(IMPLEMENTATIONS, (wrapper, scratch, fused, lambda x: direct_sdpa(scratch, x),
                                      torch_mha)))


def naive_causal_attention(queries: torch.Tensor, keys: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    """The from-scratch attention core, ``(B, H, T, hd)`` -> ``(B, H, T, hd)``: scores, mask,
    softmax, weights @ values, with the full ``(B, H, T, T)`` matrices in memory."""
    T = queries.shape[-2]
    hide = torch.triu(torch.ones(T, T, dtype=torch.bool, device=queries.device), diagonal=1)
    scores = (queries @ keys.transpose(-2, -1)).masked_fill(hide, float("-inf"))
    return torch.softmax(scores / math.sqrt(queries.shape[-1]), dim=-1) @ values


def benchmark_attention(num_tokens: int, batch_size: int = 1, d_model: int = 768, num_heads: int = 12,
                        backward: bool = False, repeats: int = 3, names: Optional[Sequence[str]] = None,
                        device: Optional[torch.device] = None, statistic: str = "min") -> dict:
    """Seconds (best of ``repeats``) of each implementation on one ``(B, T, d_model)`` batch.

    ``backward=True`` times forward + backward (gradients of all weights). ``names`` picks a
    subset of :data:`IMPLEMENTATIONS`. Returns ``name -> seconds``.
    """
    chosen = list(IMPLEMENTATIONS if names is None else names)
    unknown = [name for name in chosen if name not in IMPLEMENTATIONS]
    if unknown:
        raise ValueError(f"unknown implementation(s) {unknown}; choose from {list(IMPLEMENTATIONS)}")
    if statistic not in ("median", "min"):
        raise ValueError(f"statistic must be 'median' or 'min', got {statistic!r}")
    _check_count("repeats", repeats)
    functions = attention_implementations(d_model, num_heads, num_tokens, device=device)
    x = torch.randn(batch_size, num_tokens, d_model, device=device)
    calls = {}
    for name in chosen:
        fn = functions[name]
        if backward:
            def call(fn=fn):
                fn(x).sum().backward()
        else:
            def call(fn=fn):
                with torch.no_grad():
                    fn(x)
        calls[name] = call
        call()  # warm-up: allocations, kernel selection
    # Round robin: one call of each implementation per round, so a burst of load from another
    # program slows all of them alike instead of ruining one implementation's numbers.
    times: dict = {name: [] for name in chosen}
    for _ in range(repeats):
        for name, call in calls.items():
            times[name].append(time_call(call, repeats=1, warmup=0, device=device))
    reduce = statistics.median if statistic == "median" else min
    seconds = {name: reduce(values) for name, values in times.items()}
    return seconds


def sweep(tokens: Sequence[int], batch_size: int = 1, d_model: int = 768, num_heads: int = 12,
          passes: Sequence[str] = ("forward", "forward+backward"), repeats: int = 3,
          device: Optional[torch.device] = None, skip: Optional[Callable[[int, str, str], bool]] = None,
          progress: bool = False) -> List[dict]:
    """Run :func:`benchmark_attention` for every ``T`` in ``tokens`` and every pass.

    ``skip(T, pass_name, implementation)`` may return True to leave a slow measurement out.
    Returns one dict per (T, pass): ``tokens, batch_size, d_model, num_heads, pass, seconds``
    (``name -> seconds``, skipped names missing) and ``flops`` (see :func:`attention_flops`,
    causal, forward x 3 for forward + backward).
    """
    rows = []
    for T in tokens:
        for pass_name in passes:
            if pass_name not in ("forward", "forward+backward"):
                raise ValueError(f"passes must be 'forward' or 'forward+backward', got {pass_name!r}")
            names = [n for n in IMPLEMENTATIONS if not (skip and skip(T, pass_name, n))]
            seconds = benchmark_attention(T, batch_size, d_model, num_heads,
                                          backward=pass_name != "forward", repeats=repeats,
                                          names=names, device=device)
            flops = attention_flops(batch_size, T, d_model, num_heads, causal=True)
            rows.append(dict(tokens=T, batch_size=batch_size, d_model=d_model, num_heads=num_heads,
                             pass_name=pass_name, seconds=seconds,
                             flops=flops * (3 if pass_name != "forward" else 1)))
            if progress:
                print(f"T={T:>5} {pass_name:<17}", ", ".join(f"{n.split(' ')[0]} {s * 1e3:.1f} ms"
                                                             for n, s in seconds.items()), flush=True)
    return rows


class Table:
    """Measured rows shown as a table: HTML in a notebook, markdown with :meth:`to_markdown`.

    Its plain-text form only says how big it is, so a notebook's printed text stays the same from
    run to run even though the measured numbers change.
    """

    def __init__(self, header: Sequence[str], rows: Sequence[Sequence[object]]):
        self.header = [str(cell) for cell in header]
        self.rows = [[str(cell) for cell in row] for row in rows]
        for row in self.rows:
            if len(row) != len(self.header):
                raise ValueError(f"a row has {len(row)} cells but the header has {len(self.header)}: {row}")

    def to_markdown(self) -> str:
        lines = ["| " + " | ".join(self.header) + " |", "|" + "---|" * len(self.header)]
        return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in self.rows])

    def _repr_html_(self) -> str:
        import html

        head = "".join(f"<th>{html.escape(cell)}</th>" for cell in self.header)
        body = "".join("<tr>" + "".join(f"<td>{html.escape(cell)}</td>" for cell in row) + "</tr>"
                       for row in self.rows)
        return f'<table class="table"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'

    def __repr__(self) -> str:
        return f"<Table: {len(self.rows)} rows x {len(self.header)} columns>"


def benchmark_table(rows: List[dict], names: Sequence[str] = IMPLEMENTATIONS) -> Table:
    """The rows of :func:`sweep` as a :class:`Table`: per implementation, milliseconds, the ratio
    to the fastest implementation of that row, and GFLOP/s achieved."""
    header = ["B x T x d, heads", "pass"] + [name.split(" (")[0] for name in names]
    table_rows = []
    for row in rows:
        fastest = min(row["seconds"].values())
        cells = []
        for name in names:
            seconds = row["seconds"].get(name)
            if seconds is None:
                cells.append("skipped")
            else:
                gflops = row["flops"] / seconds / 1e9
                cells.append(f"{seconds * 1e3:.1f} ms ({seconds / fastest:.1f}x, {gflops:.0f} GFLOP/s)")
        config = f"{row['batch_size']} x {row['tokens']} x {row['d_model']}, {row['num_heads']}"
        table_rows.append([config, row["pass_name"]] + cells)
    return Table(header, table_rows)


def markdown_table(rows: List[dict], names: Sequence[str] = IMPLEMENTATIONS) -> str:
    """:func:`benchmark_table` as markdown text (for files and terminals)."""
    return benchmark_table(rows, names).to_markdown()
