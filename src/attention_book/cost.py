"""What attention costs (chapter 10): floating-point operations, bytes, arithmetic intensity.

Counts, not measurements: every function here is exact arithmetic on the sizes, so the chapter
prints the same numbers on every machine.

* :func:`attention_flops` - the matrix products of one multi-head self-attention forward pass;
* :func:`block_flops` - the same plus a transformer block's MLP, to see where ``T^2`` wins;
* :func:`score_matrix_bytes` - one ``(B, H, T, T)`` tensor of scores or weights;
* :func:`attention_bytes_moved` and :func:`arithmetic_intensity` - the memory traffic of the
  attention core with and without a fused kernel, and FLOPs per byte (the roofline's x axis);
* :func:`kv_cache_bytes` and :func:`decode_step_cost` - what generating one token with a KV cache
  reads and computes: why decoding is limited by memory, and what grouped-query attention saves;
* :func:`generation_step_flops` - one generation step with and without a KV cache, part by part
  (projections, MLP, attention core): where the cache's saving comes from;
* :func:`cpu_flash_blocks` and :func:`causal_tile_fraction` - the tiles PyTorch's CPU flash
  kernel computes with ``is_causal=True``: the causal saving its block sizes allow.
"""

from __future__ import annotations

from typing import Optional

import torch

from .validation import positive_int

__all__ = [
    "attention_flops",
    "block_flops",
    "score_matrix_bytes",
    "attention_bytes_moved",
    "arithmetic_intensity",
    "kv_cache_bytes",
    "decode_step_cost",
    "generation_step_flops",
    "cpu_flash_blocks",
    "causal_tile_fraction",
]

#: queries per block of a fused kernel in this model (FlashAttention-2 uses tiles of 64 or 128
#: rows on current GPUs, depending on the head size and the GPU)
QUERY_BLOCK = 128


def _check_sizes(batch_size, num_tokens, d_model, num_heads) -> None:
    for name, value in (("batch_size", batch_size), ("num_tokens", num_tokens),
                        ("d_model", d_model), ("num_heads", num_heads)):
        positive_int(name, value)
    if d_model % num_heads:
        divisors = tuple(k for k in range(1, d_model + 1) if d_model % k == 0)
        raise ValueError(
            f"d_model={d_model} is not divisible by num_heads={num_heads}: every head gets "
            f"d_model // num_heads columns; choose num_heads from {divisors}"
        )


def _element_size(dtype) -> int:
    if not isinstance(dtype, torch.dtype):
        raise TypeError(
            f"dtype must be a torch.dtype such as torch.float32, got {dtype!r}"
        )
    return torch.empty((), dtype=dtype).element_size()


def _pairs(num_tokens: int, causal: bool) -> int:
    """(query, key) pairs a kernel must compute: all, or the visible half."""
    return num_tokens * (num_tokens + 1) // 2 if causal else num_tokens**2


def attention_flops(batch_size: int, num_tokens: int, d_model: int,
                    num_heads: int, causal: bool = False,
                    projections: bool = True) -> int:
    """Floating-point operations of one multi-head self-attention forward pass.

    Counts the matrix products only (softmax, scaling and masking are
    ``O(T^2)`` element-wise work), at 2 FLOPs per multiply-add, for
    ``d_in = d_out = d_model``:

    * projections ``W_query``, ``W_key``, ``W_value``, ``out_proj``:
      ``2 * B * T * d^2`` each;
    * scores ``Q K^T`` and context ``A V``: ``2 * B * T^2 * d`` each, summed
      over the heads (``H`` heads of ``d / H`` columns do the work of one
      head of ``d`` columns).

    ``causal=True`` counts only the ``T (T + 1) / 2`` visible pairs: the
    useful work, which a kernel that skips the hidden half must do.
    ``projections=False`` gives the attention core alone. A backward pass
    costs about twice the forward pass.
    """
    _check_sizes(batch_size, num_tokens, d_model, num_heads)
    pairs = _pairs(num_tokens, causal)
    core = 2 * (2 * batch_size * pairs * d_model)  # Q K^T and A V
    projection = 4 * (2 * batch_size * num_tokens * d_model**2)
    return core + (projection if projections else 0)


def block_flops(batch_size: int, num_tokens: int, d_model: int,
                num_heads: int, mlp_ratio: int = 4,
                causal: bool = False) -> dict:
    """FLOPs of one transformer block, split into the parts that grow
    like ``T`` and like ``T^2``.

    A GPT block is attention plus an MLP of two layers, ``d -> mlp_ratio * d
    -> d`` (``2 * 2 * B * T * d * mlp_ratio * d`` FLOPs). Returns a dict with
    ``linear`` (projections + MLP, grows like ``T``), ``quadratic`` (the
    attention core, grows like ``T^2``) and ``total``.
    """
    positive_int("mlp_ratio", mlp_ratio)
    core = attention_flops(batch_size, num_tokens, d_model, num_heads,
                           causal=causal, projections=False)
    projections = attention_flops(batch_size, num_tokens, d_model, num_heads,
                                  causal=causal) - core
    mlp = 2 * (2 * batch_size * num_tokens * d_model * mlp_ratio * d_model)
    return {"linear": projections + mlp, "quadratic": core,
            "total": projections + mlp + core}


def score_matrix_bytes(batch_size: int, num_tokens: int, num_heads: int,
                       dtype: torch.dtype = torch.float32) -> int:
    """Bytes of one ``(B, H, T, T)`` tensor of scores (or weights)."""
    for name, value in (("batch_size", batch_size),
                        ("num_tokens", num_tokens), ("num_heads", num_heads)):
        positive_int(name, value)
    element = _element_size(dtype)
    return batch_size * num_heads * num_tokens * num_tokens * element


def attention_bytes_moved(batch_size: int, num_tokens: int, d_model: int,
                          num_heads: int, dtype: torch.dtype = torch.float32,
                          fused: bool = True, query_block: int = QUERY_BLOCK) -> int:
    """Bytes the attention core reads from and writes to main memory (a
    simple model, for comparing orders of magnitude).

    From scratch (``fused=False``): read ``Q``, ``K``, ``V`` and write the
    output (``4 * B * T * d`` numbers), and also write the ``(B, H, T, T)``
    scores, read them back for the softmax, write the weights and read them
    again for ``A @ V``: ``4 * B * H * T^2`` more numbers (our code's separate
    mask and scale steps add even more).

    Fused (``fused=True``): the scores live tile by tile in fast on-chip
    memory (GPU shared memory, CPU cache) and never reach main memory. The
    kernel reads ``Q`` once and writes the output once (``2 * B * T * d``),
    but the on-chip memory holds only one block of ``query_block`` queries
    with its running softmax at a time, so it reads all of ``K`` and ``V``
    again for every block of queries: ``ceil(T / query_block)`` passes of
    ``2 * B * T * d`` numbers. That is FlashAttention's count (Dao et al.,
    2022: ``Theta(T^2 d^2 / M)`` accesses for on-chip memory of ``M``
    numbers, whose blocks hold about ``M / d`` rows). Traffic still grows like
    ``T^2``, only ``2 * query_block / d_head`` times more slowly than the
    from-scratch ``T x T`` matrices (``4 * B * H * T^2`` against
    ``2 * B * T^2 * d / query_block`` numbers, with ``d = H * d_head``); with ``query_block >= T`` (everything fits on chip)
    it is the ideal ``4 * B * T * d``.
    """
    _check_sizes(batch_size, num_tokens, d_model, num_heads)
    query_block = positive_int("query_block", query_block)
    element = _element_size(dtype)
    if fused:
        passes = -(-num_tokens // query_block)  # ceil(T / query_block)
        numbers = 2 * batch_size * num_tokens * d_model * (1 + passes)  # Q, O; K and V per pass
        return numbers * element
    inputs_and_output = 4 * batch_size * num_tokens * d_model
    square = 4 * batch_size * num_heads * num_tokens**2
    return (inputs_and_output + square) * element


def arithmetic_intensity(batch_size: int, num_tokens: int, d_model: int,
                         num_heads: int, dtype: torch.dtype = torch.float32,
                         fused: bool = True, causal: bool = False,
                         query_block: int = QUERY_BLOCK) -> float:
    """FLOPs per byte moved of the attention core (no projections), with the
    traffic of :func:`attention_bytes_moved`.

    The roofline model: a kernel that does ``I`` FLOPs per byte can run at
    most ``min(peak FLOP/s, I * memory bandwidth)``. Below the ridge point
    ``peak / bandwidth`` it waits for memory, above it for arithmetic. The
    from-scratch core levels off at ``d_head / bytes per number`` (16 for
    heads of 64 float32 columns); the fused core at ``2 * query_block / bytes
    per number`` (64 for blocks of 128 float32 queries), however long the
    sequence (all FLOPs and bytes counted; ``causal=True`` halves the FLOPs
    but not this model's bytes).
    """
    flops = attention_flops(batch_size, num_tokens, d_model, num_heads,
                            causal=causal, projections=False)
    moved = attention_bytes_moved(batch_size, num_tokens, d_model, num_heads,
                                  dtype=dtype, fused=fused,
                                  query_block=query_block)
    return flops / moved


def kv_cache_bytes(batch_size: int, num_tokens: int, d_model: int,
                   num_heads: int, num_layers: int = 1,
                   num_kv_heads: Optional[int] = None,
                   dtype: torch.dtype = torch.float32) -> int:
    """Bytes of a KV cache: one key and one value vector of
    ``num_kv_heads * head_dim`` numbers per token, layer and sequence.

    ``num_kv_heads`` defaults to ``num_heads`` (multi-head attention); grouped-query attention
    with ``num_kv_heads = num_heads / g`` stores ``g`` times less, multi-query (1) ``num_heads``
    times less.
    """
    _check_sizes(batch_size, num_tokens, d_model, num_heads)
    positive_int("num_layers", num_layers)
    num_kv_heads = _kv_heads(num_heads, num_kv_heads)
    kv_width = num_kv_heads * (d_model // num_heads)
    return 2 * batch_size * num_tokens * num_layers * kv_width * _element_size(dtype)


def _kv_heads(num_heads: int, num_kv_heads: Optional[int]) -> int:
    if num_kv_heads is None:
        return num_heads
    positive_int("num_kv_heads", num_kv_heads)
    if num_heads % num_kv_heads:
        divisors = tuple(k for k in range(1, num_heads + 1) if num_heads % k == 0)
        raise ValueError(
            f"num_kv_heads={num_kv_heads} does not divide num_heads={num_heads}; choose "
            f"num_kv_heads from {divisors}"
        )
    return num_kv_heads


def decode_step_cost(batch_size: int, cached_tokens: int, d_model: int,
                     num_heads: int, num_layers: int = 1,
                     num_kv_heads: Optional[int] = None, mlp_ratio: int = 4,
                     dtype: torch.dtype = torch.float32) -> dict:
    """FLOPs and bytes of generating one token per sequence with a KV cache of
    ``cached_tokens`` tokens, in the transformer blocks (embeddings, layer
    norms and the output layer left out).

    Per layer and sequence the new token's query meets ``cached_tokens + 1``
    keys and values: ``2 * 2 * (t + 1) * d`` FLOPs (scores and context, all
    query heads), reading the whole cache of that layer. The weights
    (``4 d^2`` attention + ``2 * mlp_ratio * d^2`` MLP numbers per layer) do
    2 FLOPs per number and token, and are read once per step for the whole
    batch. Returns a dict with ``attention_flops``, ``cache_bytes``,
    ``weight_flops``, ``weight_bytes``, ``attention_intensity`` (the
    attention core alone: ``2 * num_heads / num_kv_heads / bytes per number``
    FLOP per byte, whatever the batch or the length) and ``intensity`` (the
    whole step).
    """
    _check_sizes(batch_size, cached_tokens, d_model, num_heads)
    positive_int("num_layers", num_layers)
    positive_int("mlp_ratio", mlp_ratio)
    num_kv_heads = _kv_heads(num_heads, num_kv_heads)
    element = _element_size(dtype)
    keys_seen = cached_tokens + 1  # the cache plus the new token itself
    attention = 2 * 2 * batch_size * keys_seen * d_model * num_layers
    cache = kv_cache_bytes(batch_size, keys_seen, d_model, num_heads, num_layers,
                           num_kv_heads, dtype)
    weight_numbers = (4 + 2 * mlp_ratio) * d_model**2 * num_layers
    weight_flops = 2 * weight_numbers * batch_size
    weight_bytes = weight_numbers * element
    return {
        "attention_flops": attention,
        "cache_bytes": cache,
        "weight_flops": weight_flops,
        "weight_bytes": weight_bytes,
        "attention_intensity": attention / cache,
        "intensity": (attention + weight_flops) / (cache + weight_bytes),
    }


def generation_step_flops(num_tokens: int, d_model: int, num_heads: int, cached: bool,
                          mlp_ratio: int = 4, batch_size: int = 1) -> dict:
    """FLOPs of one transformer block for one generation step, part by part: the step that
    produces the output of token ``num_tokens`` (the text so far, the new token included).

    Without a cache (``cached=False``) the step is a forward pass over all ``num_tokens`` tokens
    (every earlier token's projections and MLP are computed again, and thrown away but for the
    last row); with a cache only the new token is projected and sent through the MLP, and its
    query meets the ``num_tokens`` cached keys. Returns a dict of

    * ``projections``: ``W_query``, ``W_key``, ``W_value``, ``out_proj``, ``2 * 4 d^2`` per token;
    * ``mlp``: ``d -> mlp_ratio * d -> d``, ``2 * 2 * mlp_ratio * d^2`` per token (0 for an
      attention-only stack, ``mlp_ratio=0``);
    * ``attention_core``: scores and context over the visible pairs (causal: ``T (T + 1) / 2``
      without a cache, ``T`` with one), ``2 * 2 * d`` per pair;
    * ``linear`` (projections + MLP) and ``total``.

    Multiply by the number of layers for a whole model (embeddings, layer norms and the output
    layer left out).
    """
    _check_sizes(batch_size, num_tokens, d_model, num_heads)
    if isinstance(mlp_ratio, bool) or not isinstance(mlp_ratio, int):
        raise TypeError(f"mlp_ratio must be an int >= 0 (0: no MLP), got "
                        f"{type(mlp_ratio).__name__} ({mlp_ratio!r})")
    if mlp_ratio < 0:
        raise ValueError(f"mlp_ratio must be an int >= 0 (0: no MLP), got {mlp_ratio}")
    if not isinstance(cached, bool):
        raise TypeError(f"cached must be True or False, got {cached!r}")
    tokens = 1 if cached else num_tokens  # tokens that go through the linear layers
    pairs = num_tokens if cached else _pairs(num_tokens, causal=True)
    projections = 2 * 4 * batch_size * tokens * d_model**2
    mlp = 2 * 2 * mlp_ratio * batch_size * tokens * d_model**2
    core = 2 * 2 * batch_size * pairs * d_model
    return {"projections": projections, "mlp": mlp, "attention_core": core,
            "linear": projections + mlp, "total": projections + mlp + core}


def cpu_flash_blocks(num_queries: int) -> tuple:
    """``(query_block, key_block)`` of PyTorch's CPU FlashAttention kernel for ``num_queries``
    queries: blocks of 32 queries below 192, 64 below 768 and 256 from 768 on, always 512 keys
    (``flash_attention_kernel_impl`` in ``aten/src/ATen/native/cpu/FlashAttentionKernel.cpp``,
    as of PyTorch 2.13; another version may choose other blocks: compare
    :func:`causal_tile_fraction` with a measurement)."""
    positive_int("num_queries", num_queries)
    query_block = 256 if num_queries >= 768 else 64 if num_queries >= 192 else 32
    return query_block, 512


def causal_tile_fraction(num_tokens: int, query_block: int, key_block: int) -> float:
    """The share of the ``T x T`` score entries a tiled causal kernel computes, against the same
    kernel without a mask.

    The kernel walks the queries in blocks of ``query_block`` and, for each, the keys in blocks
    of ``key_block``; told ``is_causal=True`` it stops after the key block that holds the block's
    last visible key (PyTorch's CPU kernel: ``num_keys = min(m + qBlockSize, kvSize)``). A key
    block it does visit is computed in full and masked inside. So the saving approaches one half
    only when the blocks are small next to ``T``: for the CPU kernel's 256 x 512 blocks at
    ``T = 1024`` it computes 6 of 8 tiles, ``0.75``.
    """
    for name, value in (("num_tokens", num_tokens), ("query_block", query_block),
                        ("key_block", key_block)):
        positive_int(name, value)
    query_block, key_block = min(query_block, num_tokens), min(key_block, num_tokens)
    computed = 0
    for start in range(0, num_tokens, query_block):
        rows = min(query_block, num_tokens - start)
        visible = min(start + rows, num_tokens)  # keys 0 .. the block's last query
        key_blocks_visited = -(-visible // key_block)
        columns = min(key_blocks_visited * key_block, num_tokens)
        computed += rows * columns
    return computed / num_tokens**2
