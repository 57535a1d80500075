"""What attention costs (chapter 10): floating-point operations, bytes, arithmetic intensity.

Counts, not measurements: every function here is exact arithmetic on the sizes, so the chapter
prints the same numbers on every machine.

* :func:`attention_flops` - the matrix products of one multi-head self-attention forward pass;
* :func:`block_flops` - the same plus a transformer block's MLP, to see where ``T^2`` wins;
* :func:`score_matrix_bytes` - one ``(B, H, T, T)`` tensor of scores or weights;
* :func:`attention_bytes_moved` and :func:`arithmetic_intensity` - the memory traffic of the
  attention core with and without a fused kernel, and FLOPs per byte (the roofline's x axis).
"""

from __future__ import annotations

import torch

from .validation import positive_int

__all__ = [
    "attention_flops",
    "block_flops",
    "score_matrix_bytes",
    "attention_bytes_moved",
    "arithmetic_intensity",
]


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
                          fused: bool = True) -> int:
    """Bytes the attention core reads from and writes to main memory (a
    simple model, for comparing orders of magnitude).

    Both paths read ``Q``, ``K``, ``V`` and write the output: ``4 * B * T *
    d`` numbers. The from-scratch path (``fused=False``) also writes the
    ``(B, H, T, T)`` scores, reads them back for the softmax, writes the
    weights and reads them again for ``A @ V``: ``4 * B * H * T^2`` more
    numbers (our code's separate mask and scale steps add even more). A
    fused kernel keeps each tile of scores in fast on-chip memory (cache or
    GPU shared memory), so in this model it moves only the ``4 * B * T * d``.
    (Real fused kernels re-read ``K`` and ``V`` once per block of queries;
    the FlashAttention paper derives the exact count.)
    """
    _check_sizes(batch_size, num_tokens, d_model, num_heads)
    element = _element_size(dtype)
    inputs_and_output = 4 * batch_size * num_tokens * d_model
    if fused:
        return inputs_and_output * element
    square = 4 * batch_size * num_heads * num_tokens**2
    return (inputs_and_output + square) * element


def arithmetic_intensity(batch_size: int, num_tokens: int, d_model: int,
                         num_heads: int, dtype: torch.dtype = torch.float32,
                         fused: bool = True, causal: bool = False) -> float:
    """FLOPs per byte moved of the attention core (no projections).

    The roofline model: a kernel that does ``I`` FLOPs per byte can run at
    most ``min(peak FLOP/s, I * memory bandwidth)``. Below the ridge point
    ``peak / bandwidth`` it waits for memory, above it for arithmetic.
    """
    flops = attention_flops(batch_size, num_tokens, d_model, num_heads,
                            causal=causal, projections=False)
    moved = attention_bytes_moved(batch_size, num_tokens, d_model, num_heads,
                                  dtype=dtype, fused=fused)
    return flops / moved
