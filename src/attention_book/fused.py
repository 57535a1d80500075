"""The fused path (chapter 10): chapter 5's multi-head attention with PyTorch's fused kernel.

* :class:`FusedMultiHeadAttention` is :class:`~attention_book.multihead.MultiHeadAttention` with
  the attention core replaced by :func:`torch.nn.functional.scaled_dot_product_attention`: same
  parameters, same outputs (in eval mode, or with ``dropout=0``), and it never builds the
  ``(T, T)`` weights. It keeps no mask either: ``is_causal=True`` tells the kernel.
* :func:`direct_sdpa` runs the same projections and the fused kernel with no module around
  them: the reference for measuring the module's overhead.
* :func:`naive_causal_attention` is the from-scratch core written out line by line, as the
  chapter compares it with the fused kernel (``tests/test_fused.py`` checks it against
  :func:`attention_book.functional.scaled_dot_product_attention`).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from . import validation as check
from .multihead import MultiHeadAttention, merge_heads, split_heads

__all__ = [
    "FusedMultiHeadAttention",
    "direct_sdpa",
    "naive_causal_attention",
]


class FusedMultiHeadAttention(MultiHeadAttention):
    """:class:`~attention_book.multihead.MultiHeadAttention` computed by a fused kernel.

    Constructor and parameters (``W_query``, ``W_key``, ``W_value``, ``out_proj``) are those of
    :class:`MultiHeadAttention`, so trained weights move over with ``load_state_dict`` (or
    :meth:`from_module`). The forward pass calls
    :func:`torch.nn.functional.scaled_dot_product_attention` with ``is_causal=self.causal``:
    PyTorch picks the fastest kernel for the device and dtype (FlashAttention,
    memory-efficient, cuDNN, or the "math" fallback), and no ``(B, H, T, T)`` matrix is kept.

    The module has no ``(context_length, context_length)`` mask buffer (the kernel never reads
    one). A :class:`MultiHeadAttention` ``state_dict`` still loads into it: its ``mask`` entry
    holds no learned numbers and is skipped.

    Self-attention only: cross-attention (``context``) and padding masks stay with
    :class:`MultiHeadAttention`. With dropout off (``dropout=0.0`` or ``.eval()``) the outputs
    equal :class:`MultiHeadAttention`'s up to float rounding; in training mode both drop
    weights at random, but a GPU kernel draws its random numbers in its own order.
    """

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if "mask" in dict(self.named_buffers(recurse=False)):
            del self.mask  # is_causal=True replaces the (T, T) mask

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        state_dict.pop(prefix + "mask", None)  # MultiHeadAttention's mask buffer
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    @classmethod
    def from_module(cls, module: MultiHeadAttention) -> "FusedMultiHeadAttention":
        """A fused copy of ``module`` (configuration, weights, device, dtype, mode)."""
        if not isinstance(module, MultiHeadAttention):
            raise TypeError(
                f"module must be a MultiHeadAttention, got "
                f"{type(module).__name__}; build one with MultiHeadAttention("
                "d_in, d_out, context_length, dropout, num_heads)"
            )
        fused = cls(module.d_in, module.d_out, module.context_length,
                    module.dropout.p, module.num_heads,
                    qkv_bias=module.W_query.bias is not None,
                    causal=module.causal, kdim=module.kdim)
        weight = module.out_proj.weight
        fused.to(weight.device, weight.dtype)
        fused.load_state_dict(module.state_dict())
        return fused.train(module.training)

    def _refuse(self, context, key_padding_mask, attn_mask, return_weights) -> None:
        """The clear error for an argument the fused path cannot use."""
        check.unsupported(
            "FusedMultiHeadAttention (causal or bidirectional self-attention only)",
            "for cross-attention or masks use MultiHeadAttention with the same state_dict",
            context=context, key_padding_mask=key_padding_mask, attn_mask=attn_mask)
        if check.boolean("return_weights", return_weights):
            raise ValueError(
                "return_weights=True is not available: the fused kernel never "
                "builds the attention weights; to look at them, run "
                "MultiHeadAttention with the same state_dict"
            )

    def forward(self, x: torch.Tensor, context=None, key_padding_mask=None,
                attn_mask=None, return_weights: bool = False) -> torch.Tensor:
        """``(B, T, d_in)`` -> ``(B, T, d_out)``, attention by the fused kernel.

        Costs within a few per cent of :func:`direct_sdpa` per call, even on a tiny input where
        the Python around the kernels is most of the time: the arguments are checked with a few
        comparisons (the full checks run, and raise their clear errors, only when one fails), and
        the projections call ``F.linear`` with the weights directly (the ``nn.Linear``
        submodules' own ``__call__``, and any hooks registered on them, are skipped).
        """
        if (context is not None or key_padding_mask is not None
                or attn_mask is not None or return_weights is not False):
            self._refuse(context, key_padding_mask, attn_mask, return_weights)
        w_query, w_key, w_value = self.W_query, self.W_key, self.W_value
        weight = w_query.weight
        if not (type(x) is torch.Tensor and x.ndim == 3  # noqa: E721 (subclasses: full check)
                and x.shape[2] == self.d_in and 0 < x.shape[1] <= self.context_length
                and x.dtype == weight.dtype and x.device == weight.device):
            self.check_inputs(x)  # MultiHeadAttention's checks: raise the clear error
        B, T, H = x.shape[0], x.shape[1], self.num_heads
        head_dim = self.head_dim
        # (B, T, d_out) -> (B, H, T, hd): view the heads, make them a batch dimension
        queries = F.linear(x, weight, w_query.bias).view(B, T, H, head_dim).transpose(1, 2)
        keys = F.linear(x, w_key.weight, w_key.bias).view(B, T, H, head_dim).transpose(1, 2)
        values = F.linear(x, w_value.weight, w_value.bias).view(B, T, H, head_dim).transpose(1, 2)
        dropout_p = self.dropout.p if self.training else 0.0
        context = F.scaled_dot_product_attention(  # scale, mask, softmax, @ V
            queries, keys, values, dropout_p=dropout_p, is_causal=self.causal
        )  # (B, H, T, hd)
        merged = context.transpose(1, 2).reshape(B, T, H * head_dim)  # (B, T, d_out)
        out_proj = self.out_proj
        return F.linear(merged, out_proj.weight, out_proj.bias)


def direct_sdpa(module: MultiHeadAttention, x: torch.Tensor) -> torch.Tensor:
    """``module``'s projections and the fused kernel, with no checks or module
    call around them: the reference for the overhead of
    :class:`FusedMultiHeadAttention` (no dropout)."""
    H = module.num_heads
    queries = split_heads(F.linear(x, module.W_query.weight, module.W_query.bias), H)
    keys = split_heads(F.linear(x, module.W_key.weight, module.W_key.bias), H)
    values = split_heads(F.linear(x, module.W_value.weight, module.W_value.bias), H)
    context = F.scaled_dot_product_attention(queries, keys, values,
                                             is_causal=module.causal)
    return F.linear(merge_heads(context), module.out_proj.weight,
                    module.out_proj.bias)


def naive_causal_attention(queries: torch.Tensor, keys: torch.Tensor,
                           values: torch.Tensor) -> torch.Tensor:
    """The from-scratch causal core, ``(B, H, T, hd)`` -> ``(B, H, T, hd)``:
    scores, mask, softmax, weights @ values, with the full ``(B, H, T, T)``
    matrices in memory. Written out on purpose: the chapter times these lines
    against the fused kernel."""
    T = queries.shape[-2]
    hide = torch.triu(torch.ones(T, T, dtype=torch.bool,
                                 device=queries.device), diagonal=1)
    scores = queries @ keys.transpose(-2, -1)  # (B, H, T, T)
    scores = scores.masked_fill(hide, float("-inf"))  # hide the future
    weights = torch.softmax(scores / queries.shape[-1] ** 0.5, dim=-1)
    return weights @ values  # (B, H, T, hd)
