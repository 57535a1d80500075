"""Self-checks for chapter 5 (multi-head attention).

``from attention_book.checks import ch05`` then, in the exercise cells::

    ch05.split_merge(split_heads, merge_heads)   # ex-05-split-heads
    ch05.torch_twin(to_torch_attention)          # ex-05-torch-twin
"""

from __future__ import annotations

import torch
from torch import nn

from ..masks import causal_mask
from ..multihead import MultiHeadAttention
from .core import Hint, close, register

__all__ = ["split_merge", "torch_twin"]


def _numbered(batch_size: int, num_tokens: int, d_out: int) -> torch.Tensor:
    """A tensor whose entries are all different, so any mix-up of positions is visible."""
    return torch.arange(batch_size * num_tokens * d_out, dtype=torch.float32).view(
        batch_size, num_tokens, d_out
    )


def _call_merge(merge_heads, heads: torch.Tensor) -> torch.Tensor:
    try:
        return merge_heads(heads)
    except RuntimeError as err:
        if "view size is not compatible" in str(err) or "contiguous" in str(err):
            raise Hint(
                "after transpose(1, 2) the tensor is no longer contiguous in memory, so .view "
                "fails: call .contiguous() before .view(...), or use .reshape(...)"
            ) from None
        raise


# ---------------------------------------------------------------- ex-05-split-heads


@register("ex-05-split-heads", "Split a projection into heads and merge them back")
def split_merge(split_heads, merge_heads):
    """Check ``split_heads(x, num_heads)`` and ``merge_heads(heads)``."""
    B, T, H, hd = 2, 5, 3, 4
    x = _numbered(B, T, H * hd)  # (2, 5, 12)

    def split_shape():
        heads = split_heads(x, H)
        if not isinstance(heads, torch.Tensor):
            raise Hint(f"split_heads should return a tensor, got {type(heads).__name__}")
        shape = tuple(heads.shape)
        if shape == (B, T, H, hd):
            raise Hint(
                f"you returned (B, T, num_heads, head_dim) = {shape}; swap the token and head "
                "axes with .transpose(1, 2) so each head is its own (T, head_dim) block"
            )
        if shape != (B, H, T, hd):
            raise Hint(
                f"for x of shape {(B, T, H * hd)} and num_heads={H} expected shape "
                f"(B, num_heads, T, head_dim) = {(B, H, T, hd)}, got {shape}"
            )

    def split_columns():
        heads = split_heads(x, H)
        if tuple(heads.shape) != (B, H, T, hd):
            raise Hint("fix the shape first (see the test above)")
        if torch.equal(heads, x.view(B, H, T, hd)):
            raise Hint(
                "the shape is right but tokens got mixed into heads: viewing (B, T, d_out) "
                "straight as (B, num_heads, T, head_dim) regroups the memory. View as "
                "(B, T, num_heads, head_dim) first, then .transpose(1, 2)"
            )
        for h in range(H):
            if not torch.equal(heads[:, h], x[..., h * hd:(h + 1) * hd]):
                raise Hint(
                    f"head {h} should hold columns {h * hd}:{(h + 1) * hd} of every token, "
                    f"i.e. x[..., {h * hd}:{(h + 1) * hd}]; split the last dimension, "
                    "not the token dimension"
                )

    def split_uses_num_heads():
        heads = split_heads(x, 2)
        if tuple(heads.shape) != (B, 2, T, 6):
            raise Hint(
                f"with num_heads=2 expected shape {(B, 2, T, 6)}, got {tuple(heads.shape)}; "
                "compute head_dim = d_out // num_heads from the arguments, do not hard-code it"
            )

    def merge_shape():
        # the correct split, stored contiguously like the output of `weights @ values`
        heads = x.view(B, T, H, hd).transpose(1, 2).contiguous()
        merged = _call_merge(merge_heads, heads)
        if tuple(merged.shape) != (B, T, H * hd):
            raise Hint(
                f"merge_heads of a (B, num_heads, T, head_dim) = {tuple(heads.shape)} tensor "
                f"should return (B, T, num_heads * head_dim) = {(B, T, H * hd)}, "
                f"got {tuple(merged.shape)}"
            )

    def merge_inverts_split():
        heads = x.view(B, T, H, hd).transpose(1, 2).contiguous()
        merged = _call_merge(merge_heads, heads)
        if torch.equal(merged, heads.reshape(B, T, H * hd)):
            raise Hint(
                "the shape is right but the numbers are scrambled: reshaping "
                "(B, num_heads, T, head_dim) straight to (B, T, d_out) mixes heads and tokens. "
                "Bring the token axis back first with .transpose(1, 2)"
            )
        if not torch.equal(merged, x):
            raise Hint(
                "merge_heads(split) should give back the original (B, T, d_out) tensor: "
                "transpose(1, 2), then .contiguous().view(B, T, num_heads * head_dim)"
            )

    def round_trip():
        if not torch.equal(_call_merge(merge_heads, split_heads(x, 4)), x):
            raise Hint("merge_heads(split_heads(x, 4)) should equal x exactly")

    return [
        ("split_heads returns (B, num_heads, T, head_dim)", split_shape),
        ("head h holds columns h*head_dim:(h+1)*head_dim", split_columns),
        ("split_heads works for any num_heads", split_uses_num_heads),
        ("merge_heads returns (B, T, d_out)", merge_shape),
        ("merge_heads undoes the split", merge_inverts_split),
        ("merge_heads(split_heads(x)) == x", round_trip),
    ]


# ---------------------------------------------------------------- ex-05-torch-twin


def _reference(qkv_bias: bool, causal: bool, seed: int = 5) -> MultiHeadAttention:
    with torch.random.fork_rng(devices=[]):  # leave the reader's random state untouched
        torch.manual_seed(seed)
        mha = MultiHeadAttention(8, 8, 6, 0.0, num_heads=2, qkv_bias=qkv_bias, causal=causal)
        if qkv_bias:
            with torch.no_grad():  # clearly non-zero biases, so a forgotten copy shows
                for layer in (mha.W_query, mha.W_key, mha.W_value):
                    layer.bias.normal_()
    return mha.eval()


def _diagnose(theirs: nn.MultiheadAttention, mha: MultiHeadAttention) -> None:
    """Compare the copied parameters with ours and raise the most specific hint."""
    weights = [mha.W_query.weight, mha.W_key.weight, mha.W_value.weight]
    in_proj = getattr(theirs, "in_proj_weight", None)
    if in_proj is None:
        raise Hint(
            "your nn.MultiheadAttention has no in_proj_weight (it was built with kdim/vdim "
            "different from embed_dim); create it as nn.MultiheadAttention(d_out, num_heads, "
            "batch_first=True)"
        )
    in_proj = in_proj.detach()
    if close(in_proj, torch.cat([w.T for w in weights])):
        raise Hint(
            "in_proj_weight holds the transposed matrices: both nn.Linear and "
            "nn.MultiheadAttention store weights as (out_features, in_features), so copy "
            "W_query.weight as it is, without .T"
        )
    if not close(in_proj, torch.cat(weights)):
        for order in ([1, 0, 2], [0, 2, 1], [2, 1, 0], [1, 2, 0], [2, 0, 1]):
            if close(in_proj, torch.cat([weights[i] for i in order])):
                raise Hint(
                    "in_proj_weight has the right blocks in the wrong order: PyTorch expects "
                    "torch.cat([W_query.weight, W_key.weight, W_value.weight]) (query, key, value)"
                )
        raise Hint(
            "in_proj_weight should be torch.cat([W_query.weight, W_key.weight, W_value.weight]), "
            "a (3 * d_out, d_in) tensor; copy it inside torch.no_grad() with .copy_(...)"
        )
    in_bias = getattr(theirs, "in_proj_bias", None)
    if mha.W_query.bias is not None:
        expected_bias = torch.cat([mha.W_query.bias, mha.W_key.bias, mha.W_value.bias])
        if in_bias is None or not close(in_bias, expected_bias):
            raise Hint(
                "with qkv_bias=True the projections have biases too: copy "
                "torch.cat([W_query.bias, W_key.bias, W_value.bias]) into in_proj_bias"
            )
    elif in_bias is not None and not close(in_bias, torch.zeros_like(in_bias)):
        raise Hint(
            "our projections have no bias (qkv_bias=False) but your in_proj_bias is not zero; "
            "set it to zeros (in_proj_bias.zero_())"
        )
    if close(theirs.out_proj.weight, mha.out_proj.weight.T) and not close(
        theirs.out_proj.weight, mha.out_proj.weight
    ):
        raise Hint("out_proj.weight is transposed: copy mha.out_proj.weight as it is, without .T")
    if not close(theirs.out_proj.weight, mha.out_proj.weight):
        raise Hint(
            "the output projection is missing: copy mha.out_proj.weight into "
            "torch_mha.out_proj.weight (it mixes the concatenated heads)"
        )
    if theirs.out_proj.bias is None or not close(theirs.out_proj.bias, mha.out_proj.bias):
        raise Hint("copy the output projection's bias too: out_proj.bias")


@register("ex-05-torch-twin", "Copy our weights into torch.nn.MultiheadAttention")
def torch_twin(to_torch_attention):
    """Check ``to_torch_attention(mha) -> nn.MultiheadAttention`` with the same outputs."""

    def build(qkv_bias: bool, causal: bool = False):
        mha = _reference(qkv_bias, causal)
        with torch.random.fork_rng(devices=[]):  # creating their module draws random numbers
            theirs = to_torch_attention(mha)
        if not isinstance(theirs, nn.MultiheadAttention):
            raise Hint(
                f"return a torch.nn.MultiheadAttention, got {type(theirs).__name__}; "
                "did you forget `return torch_mha`?"
            )
        if theirs.embed_dim != mha.d_out or theirs.num_heads != mha.num_heads:
            raise Hint(
                f"create it with embed_dim={mha.d_out} and num_heads={mha.num_heads} (from "
                f"mha.d_out and mha.num_heads), got embed_dim={theirs.embed_dim}, "
                f"num_heads={theirs.num_heads}"
            )
        return mha, theirs.eval()

    def compare(qkv_bias: bool, causal: bool):
        mha, theirs = build(qkv_bias, causal)
        x = torch.randn(2, 6, 8, generator=torch.Generator().manual_seed(0))
        mask = causal_mask(6) if causal else None
        with torch.no_grad():
            ours = mha(x)
            output = theirs(x, x, x, attn_mask=mask, need_weights=False)[0]
        if close(output, ours, atol=1e-5):
            return
        if not theirs.batch_first:
            raise Hint(
                "create it with batch_first=True: our inputs are (B, T, d), PyTorch's default "
                "is (T, B, d)"
            )
        _diagnose(theirs, mha)
        raise Hint("the outputs differ although the weights look right; compare your copy with "
                   "the text again (query, key, value order; output projection)")

    def not_shared():
        mha, theirs = build(False)
        with torch.no_grad():
            theirs.out_proj.weight.add_(1.0)
        if close(mha.out_proj.weight, theirs.out_proj.weight):
            raise Hint(
                "your module shares its tensors with ours (changing one changes the other); "
                "copy the values with .copy_(...) instead of assigning the same Parameter"
            )

    return [
        ("same output, bidirectional", lambda: compare(False, causal=False)),
        ("same output, causal mask", lambda: compare(False, causal=True)),
        ("same output with qkv_bias=True", lambda: compare(True, causal=False)),
        ("copies values instead of sharing tensors", not_shared),
    ]
