"""Chapter 4: a compact self-attention module (scaled dot-product attention, one head).

Two versions with the same constructor and the same ``forward``:

* :class:`SelfAttentionParams` keeps its three projection matrices as ``nn.Parameter`` of shape
  ``(d_in, d_out)`` and computes ``x @ W`` (the row-vector convention used throughout the book).
* :class:`SelfAttention` uses three ``nn.Linear`` layers. ``nn.Linear`` stores its weight as
  ``(d_out, d_in)`` and computes ``x @ weight.T (+ bias)``; it is the version later chapters build on.

Both compute, for inputs ``x`` of shape ``(T, d_in)`` or ``(B, T, d_in)``::

    queries, keys, values = x W_q, x W_k, x W_v
    attention_weights     = softmax(queries keys^T / sqrt(d_k))   # rows sum to 1
    context_vectors       = attention_weights values               # (T, d_v) or (B, T, d_v)

:func:`copy_weights` moves the weights from one version into the other (transposing as needed),
so that both give identical outputs.

Example::

    >>> import torch
    >>> torch.manual_seed(123)  # doctest: +SKIP
    >>> attention = SelfAttention(d_in=3, d_out_kq=2, d_out_v=4)
    >>> attention(torch.rand(6, 3)).shape
    torch.Size([6, 4])
"""

from __future__ import annotations

from typing import Optional, Tuple, Union

import torch
from torch import nn

from . import validation as check
from .functional import scaled_dot_product_attention

__all__ = ["SelfAttention", "SelfAttentionParams", "copy_weights", "scaled_dot_product"]

#: Chapter 4's name for the attention core: ``scaled_dot_product(queries, keys, values)`` returns
#: ``(context_vectors, attention_weights)``; it *is*
#: :func:`attention_book.functional.scaled_dot_product_attention` (optional ``mask``, ``dropout``
#: and ``scale`` included). The scale ``1 / sqrt(d_k)`` is read from ``keys.shape[-1]``.
scaled_dot_product = scaled_dot_product_attention


class _SelfAttentionBase(nn.Module):
    """Shared argument checks, ``forward`` and ``extra_repr`` of both versions."""

    def __init__(self, d_in: int, d_out_kq: int, d_out_v: Optional[int] = None, qkv_bias: bool = False):
        super().__init__()
        self.d_in = check.positive_int("d_in", d_in)
        self.d_out_kq = check.positive_int("d_out_kq", d_out_kq)
        self.d_out_v = check.positive_int("d_out_v", d_out_kq if d_out_v is None else d_out_v)
        self.qkv_bias = check.boolean("qkv_bias", qkv_bias)

    def project(self, x: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Return ``(queries, keys, values)`` of ``x``; subclasses define how."""
        raise NotImplementedError

    def check_input(self, x) -> torch.Tensor:
        """Raise a clear TypeError / ValueError unless ``x`` fits: ``(T, d_in)`` or ``(B, T, d_in)``,
        floating point, on the device and in the dtype of the module's weights."""
        shape = f"(T, {self.d_in}) or (B, T, {self.d_in})"
        check.floating_tensor("x", x, shape)
        check.ndim("x", x, (2, 3), shape)
        check.last_dim("x", x, self.d_in, "d_in")
        weight = next(self.parameters())
        check.same_dtype("x", x, "the weights", weight)
        check.same_device("x", x, "the weights", weight)
        return x

    def forward(
        self, x: torch.Tensor, return_weights: bool = False
    ) -> Union[torch.Tensor, Tuple[torch.Tensor, torch.Tensor]]:
        """Context vectors of ``x``: ``(T, d_in) -> (T, d_out_v)`` or ``(B, T, d_in) -> (B, T, d_out_v)``.

        With ``return_weights=True`` returns ``(context_vectors, attention_weights)``; the
        weights have shape ``(T, T)`` or ``(B, T, T)`` and each row sums to 1.
        """
        self.check_input(x)
        check.boolean("return_weights", return_weights)
        queries, keys, values = self.project(x)  # (B, T, d_k), (B, T, d_k), (B, T, d_v)
        context, weights = scaled_dot_product_attention(queries, keys, values)
        return (context, weights) if return_weights else context

    def extra_repr(self) -> str:
        return f"d_in={self.d_in}, d_out_kq={self.d_out_kq}, d_out_v={self.d_out_v}, qkv_bias={self.qkv_bias}"


class SelfAttentionParams(_SelfAttentionBase):
    """Self-attention with its projections stored as ``nn.Parameter`` matrices (chapter 4, version 1).

    ``W_query`` and ``W_key`` have shape ``(d_in, d_out_kq)``, ``W_value`` has ``(d_in, d_out_v)``
    (``d_out_v`` defaults to ``d_out_kq``). They are drawn from ``torch.randn`` in the order query,
    key, value, so ``torch.manual_seed(123); SelfAttentionParams(3, 2)`` holds the same matrices as
    the step-by-step code of the chapter. With ``qkv_bias=True`` three bias vectors ``b_query``,
    ``b_key``, ``b_value`` start at zero.
    """

    def __init__(self, d_in: int, d_out_kq: int, d_out_v: Optional[int] = None, qkv_bias: bool = False):
        super().__init__(d_in, d_out_kq, d_out_v, qkv_bias)
        self.W_query = nn.Parameter(torch.randn(self.d_in, self.d_out_kq))  # (d_in, d_k)
        self.W_key = nn.Parameter(torch.randn(self.d_in, self.d_out_kq))  # (d_in, d_k)
        self.W_value = nn.Parameter(torch.randn(self.d_in, self.d_out_v))  # (d_in, d_v)
        if qkv_bias:
            self.b_query = nn.Parameter(torch.zeros(self.d_out_kq))
            self.b_key = nn.Parameter(torch.zeros(self.d_out_kq))
            self.b_value = nn.Parameter(torch.zeros(self.d_out_v))
        else:
            self.b_query = self.b_key = self.b_value = None

    def project(self, x: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        queries = x @ self.W_query  # (T, d_in) @ (d_in, d_k) -> (T, d_k)
        keys = x @ self.W_key
        values = x @ self.W_value  # (T, d_in) @ (d_in, d_v) -> (T, d_v)
        if self.qkv_bias:
            queries, keys, values = queries + self.b_query, keys + self.b_key, values + self.b_value
        return queries, keys, values


class SelfAttention(_SelfAttentionBase):
    """Self-attention with ``nn.Linear`` projections: the finished single-head module of chapter 4.

    Args:
        d_in: size of each input embedding (the last dimension of ``x``).
        d_out_kq: size of queries and keys, ``d_k`` (they meet in a dot product, so one size).
        d_out_v: size of values and hence of the context vectors, ``d_v`` (default: ``d_out_kq``).
        qkv_bias: give the three projections a bias. ``False`` by default, as in the source texts;
            GPT-2 and BERT use QKV biases, Llama and Mistral do not (chapter 2); a key bias adds
            the same amount to every score of a row, so softmax ignores it (chapter 4's exercise).

    Attributes ``W_query``, ``W_key`` (``nn.Linear(d_in, d_out_kq)``) and ``W_value``
    (``nn.Linear(d_in, d_out_v)``); their ``.weight`` has shape ``(d_out, d_in)``.

    Call it with ``(T, d_in)`` or ``(B, T, d_in)`` inputs; ``return_weights=True`` also returns the
    attention weights.
    """

    def __init__(self, d_in: int, d_out_kq: int, d_out_v: Optional[int] = None, qkv_bias: bool = False):
        super().__init__(d_in, d_out_kq, d_out_v, qkv_bias)
        self.W_query = nn.Linear(self.d_in, self.d_out_kq, bias=qkv_bias)
        self.W_key = nn.Linear(self.d_in, self.d_out_kq, bias=qkv_bias)
        self.W_value = nn.Linear(self.d_in, self.d_out_v, bias=qkv_bias)

    def project(self, x: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        # nn.Linear computes x @ weight.T (+ bias): (T, d_in) @ (d_in, d_out) -> (T, d_out)
        return self.W_query(x), self.W_key(x), self.W_value(x)


_NAMES = ("query", "key", "value")


@torch.no_grad()
def copy_weights(src: nn.Module, dst: nn.Module) -> nn.Module:
    """Copy the projections of ``src`` into ``dst`` so that both compute the same function.

    Works in any direction between :class:`SelfAttentionParams` and :class:`SelfAttention`, and for
    any module that keeps its projections in attributes ``W_query``, ``W_key``, ``W_value``, each
    either an ``nn.Linear`` (weight ``(d_out, d_in)``) or a ``(d_in, d_out)`` matrix (such as the
    ``SelfAttentionV1`` / ``SelfAttentionV2`` classes written in chapter 4). Between the two layouts
    the weights are transposed. A missing bias counts as zero, so a module without bias can be
    copied into one with bias; the reverse needs the source biases to be zero.
    Returns ``dst``; its parameters stay separate tensors (changing one module later does not
    change the other).
    """
    plan = []
    for part in _NAMES:  # check everything first, so a refused copy leaves dst untouched
        weight, bias = _read(src, part, "src")  # (d_in, d_out), (d_out,) or None
        target, target_bias = _read(dst, part, "dst")
        if weight.shape != target.shape:
            raise ValueError(
                f"W_{part} of src maps {weight.shape[0]} -> {weight.shape[1]} features but W_{part} of dst "
                f"maps {target.shape[0]} -> {target.shape[1]}; build dst with the same d_in, d_out_kq "
                "and d_out_v as src"
            )
        if bias is not None and target_bias is None and bool(bias.abs().max() > 0):
            raise ValueError(f"src has a non-zero {part} bias but dst has none; build dst with qkv_bias=True")
        plan.append((part, weight, bias))
    for part, weight, bias in plan:
        _write(dst, part, weight, bias)
    return dst


def _read(module: nn.Module, part: str, role: str = "module"):
    """The ``part`` projection of ``module`` as a ``(d_in, d_out)`` matrix and a bias (or None)."""
    projection = getattr(module, f"W_{part}", None)
    if isinstance(projection, nn.Linear):
        return projection.weight.T, projection.bias  # nn.Linear stores (d_out, d_in)
    if isinstance(projection, torch.Tensor) and projection.ndim == 2:
        return projection, getattr(module, f"b_{part}", None)
    raise TypeError(
        f"copy_weights needs modules with W_query, W_key and W_value (nn.Linear layers or (d_in, d_out) "
        f"matrices), such as SelfAttention or SelfAttentionParams; {role} of type {type(module).__name__} "
        f"has W_{part} = {type(projection).__name__}"
    )


def _write(module: nn.Module, part: str, weight: torch.Tensor, bias) -> None:
    projection = getattr(module, f"W_{part}")
    if isinstance(projection, nn.Linear):
        projection.weight.copy_(weight.T)  # (d_in, d_out) -> (d_out, d_in)
        target_bias = projection.bias
    else:
        projection.copy_(weight)
        target_bias = getattr(module, f"b_{part}", None)
    if target_bias is not None:
        target_bias.copy_(bias if bias is not None else torch.zeros_like(target_bias))
