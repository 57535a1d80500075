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
from .core import Guard, Hint, close, register

__all__ = ["split_merge", "torch_twin", "head_contributions", "heads_context"]


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


def _sized(run, fix: str):
    """Run ``run()``; a crash on the other sizes of a check becomes a hint about fixed sizes."""
    try:
        return run()
    except RuntimeError as err:
        if "shape" in str(err) or "size" in str(err):
            raise Hint(f"{fix} (your code raised: {str(err).splitlines()[0]})") from None
        raise


# ---------------------------------------------------------------- ex-05-split-heads


@register("ex-05-split-heads", "Split into heads and merge back")
def split_merge(split_heads, merge_heads):
    """Check ``split_heads(x, num_heads)`` and ``merge_heads(heads)``."""
    B, T, H, hd = 2, 5, 3, 4
    x = _numbered(B, T, H * hd)  # (2, 5, 12)

    def split_shape():
        heads = split_heads(x, H)
        if not isinstance(heads, torch.Tensor):
            raise Hint(f"split_heads should return a tensor, got {type(heads).__name__}")
        shape = tuple(heads.shape)
        if shape == (B, hd, T, H):
            raise Hint(
                f"you returned {shape} = (B, head_dim, T, num_heads): the view order is "
                "swapped. Cut each token's d_out columns as view(B, T, num_heads, head_dim) "
                "(heads first, then the columns of one head), then .transpose(1, 2)"
            )
        if shape == (B, T, hd, H):
            raise Hint(
                f"you returned {shape} = (B, T, head_dim, num_heads): view as "
                "(B, T, num_heads, head_dim) and swap axes 1 and 2 (tokens and heads), "
                "not the last two"
            )
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
        heads = _sized(lambda: split_heads(x, 2), "with num_heads=2 your split fails: compute "
                       "head_dim = d_out // num_heads from the arguments, do not hard-code it")
        if tuple(heads.shape) != (B, 2, T, 6):
            raise Hint(
                f"with num_heads=2 expected shape {(B, 2, T, 6)}, got {tuple(heads.shape)}; "
                "compute head_dim = d_out // num_heads from the arguments, do not hard-code it"
            )
        if not torch.equal(heads, x.view(B, T, 2, 6).transpose(1, 2)):
            raise Hint(
                "with num_heads=2 the heads hold the wrong numbers: head h gets columns "
                "h*head_dim:(h+1)*head_dim of every token, with head_dim = d_out // num_heads"
            )

    def other_sizes():
        # another batch size, length and width: fixed numbers in view(...) show here
        other = _numbered(3, 4, 8)  # (3, 4, 8), num_heads 4 -> head_dim 2
        expected = other.view(3, 4, 4, 2).transpose(1, 2)
        fixed = ("read B, T and d_out from x.shape (and B, num_heads, T and head_dim from "
                 "heads.shape) instead of fixed numbers")
        heads = _sized(lambda: split_heads(other, 4), fixed)
        if tuple(heads.shape) != (3, 4, 4, 2) or not torch.equal(heads, expected):
            raise Hint(
                "split_heads is right for the first example but not for x of shape (3, 4, 8) "
                "with num_heads=4: read B, T and d_out from x.shape instead of fixed numbers"
            )
        merged = _sized(lambda: _call_merge(merge_heads, expected.contiguous()), fixed)
        if tuple(merged.shape) != (3, 4, 8) or not torch.equal(merged, other):
            raise Hint(
                "merge_heads is right for the first example but not for heads of shape "
                "(3, 4, 4, 2): read B, num_heads, T and head_dim from heads.shape instead of "
                "fixed numbers"
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
        ("head h holds columns h*head_dim:(h+1)*head_dim", split_columns),
        ("split_heads works for any num_heads", split_uses_num_heads),
        ("merge_heads undoes the split", merge_inverts_split),
        ("both work for other sizes", other_sizes),
        Guard("split_heads returns (B, num_heads, T, head_dim)", split_shape),
        Guard("merge_heads returns (B, T, d_out)", merge_shape),
        Guard("merge_heads(split_heads(x)) == x", round_trip),
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


@register("ex-05-torch-twin", "Our weights in PyTorch's multi-head attention")
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

    def other_size():
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(8)
            mha = MultiHeadAttention(6, 6, 4, 0.0, num_heads=3, causal=False).eval()
            theirs = _sized(lambda: to_torch_attention(mha), (
                "for a module with d_out=6 and num_heads=3 your code fails: read both from "
                "mha.d_out and mha.num_heads instead of fixed numbers"))
        if not isinstance(theirs, nn.MultiheadAttention):
            raise Hint(f"return a torch.nn.MultiheadAttention, got {type(theirs).__name__}")
        if theirs.embed_dim != 6 or theirs.num_heads != 3:
            raise Hint(
                "for a module with d_out=6 and num_heads=3 you built embed_dim="
                f"{theirs.embed_dim}, num_heads={theirs.num_heads}: read both from mha.d_out "
                "and mha.num_heads instead of fixed numbers"
            )
        x = torch.randn(2, 4, 6, generator=torch.Generator().manual_seed(1))
        with torch.no_grad():
            output = theirs.eval()(x, x, x, need_weights=False)[0]
            if not close(output, mha(x), atol=1e-5):
                raise Hint(
                    "right for the first module but not for d_out=6 with 3 heads: copy every "
                    "weight from mha, with no sizes written into your code"
                )

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
        ("works for another size (d_out=6, 3 heads)", other_size),
        Guard("copies values instead of sharing tensors", not_shared),
    ]


# ---------------------------------------------------------------- ex-05-head-contributions


def _reference_contributions(mha: MultiHeadAttention, x: torch.Tensor) -> torch.Tensor:
    B, T, _ = x.shape
    H, hd = mha.num_heads, mha.head_dim
    _, weights = mha(x, return_weights=True)  # (B, H, T, T)
    values = mha.W_value(x).view(B, T, H, hd).transpose(1, 2)  # (B, H, T, hd)
    W_O = mha.out_proj.weight.T.reshape(H, hd, mha.d_out)  # (H, hd, d_out)
    return (weights @ values) @ W_O  # (B, H, T, d_out)


def _contribution_module(num_heads: int, d_out: int, causal: bool, seed: int):
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        mha = MultiHeadAttention(5, d_out, 8, 0.0, num_heads=num_heads, causal=causal)
        with torch.no_grad():  # a clearly non-zero output bias, so its handling shows
            mha.out_proj.bias.normal_()
    return mha.eval()


def _contribution_diagnosis(out, mha, x) -> str:
    """A hint naming the mistake when ``out`` equals a typical wrong answer."""
    B, T, _ = x.shape
    H, hd, d_out = mha.num_heads, mha.head_dim, mha.d_out
    with torch.no_grad():
        expected = _reference_contributions(mha, x)
        _, weights = mha(x, return_weights=True)
        values = mha.W_value(x).view(B, T, H, hd).transpose(1, 2)
        rows = mha.out_proj.weight.reshape(H, hd, d_out)  # rows, not columns
        wrong_values = mha.W_value(x).view(B, H, T, hd)
        W_O = mha.out_proj.weight.T.reshape(H, hd, d_out)
    if out.shape != expected.shape:
        return ""
    candidates = [
        (expected + mha.out_proj.bias.detach(), "every head's slice includes out_proj.bias, so "
         "the sum over heads counts the bias num_heads times: leave the bias out, it belongs "
         "to no head (output = sum of the heads + out_proj.bias)"),
        ((weights @ values) @ rows, "you cut out_proj.weight into row blocks: nn.Linear stores "
         "(out_features, in_features) and computes x @ weight.T, so head h is read by the "
         "COLUMNS h*head_dim:(h+1)*head_dim of out_proj.weight, i.e. rows of weight.T"),
        ((weights @ wrong_values) @ W_O, "the values were split with view(B, num_heads, T, "
         "head_dim): split them as view(B, T, num_heads, head_dim).transpose(1, 2)"),
    ]
    for candidate, hint in candidates:
        if close(out, candidate, atol=1e-5):
            return hint
    return ""


@register("ex-05-head-contributions", "What each head adds to the output")
def head_contributions(head_contributions):
    """Check ``head_contributions(mha, x) -> (B, num_heads, T, d_out)``."""
    x = torch.randn(2, 4, 5, generator=torch.Generator().manual_seed(50))  # (B, T, d_in)

    def call(mha, inputs):
        state = {k: v.clone() for k, v in mha.state_dict().items()}
        out = head_contributions(mha, inputs.clone())
        if not isinstance(out, torch.Tensor):
            raise Hint(
                f"head_contributions should return a tensor, got {type(out).__name__}; did "
                "you forget `return`?"
            )
        for key, value in mha.state_dict().items():
            if not torch.equal(value, state[key]):
                raise Hint(
                    f"your function changed the module's {key}: work on copies (or only read "
                    "the weights), never modify mha"
                )
        return out.detach()

    def shape():
        mha = _contribution_module(3, 6, False, 1)
        out = call(mha, x)
        expected = (2, 3, 4, 6)
        if tuple(out.shape) == (2, 3, 4, 2):
            raise Hint(
                f"you returned {tuple(out.shape)} = (B, num_heads, T, head_dim): the heads "
                "before out_proj. Each head's output still has to go through its part of "
                "out_proj, W_O^(h) = out_proj.weight.T[h*head_dim:(h+1)*head_dim]"
            )
        if tuple(out.shape) != expected:
            raise Hint(
                f"expected (B, num_heads, T, d_out) = {expected}, got {tuple(out.shape)}"
            )

    def sums_to_output(causal: bool):
        mha = _contribution_module(3, 6, causal, 2 + causal)
        out = call(mha, x)
        with torch.no_grad():
            target = mha(x)
        if out.shape != (2, 3, 4, 6):
            raise Hint("fix the shape first (see the shape check)")
        if close(out.sum(dim=1) + mha.out_proj.bias.detach(), target, atol=1e-5):
            return
        raise Hint(
            _contribution_diagnosis(out, mha, x)
            or "the heads' contributions plus out_proj.bias do not add up to mha(x): "
            "contribution h = head_h @ W_O^(h), with head_h = weights[:, h] @ values of head h"
            + (" (this module is causal: use the weights mha returns with "
               "return_weights=True, which include the mask)" if causal else "")
        )

    def one_head_each():
        # silence head 1's values: only slice 1 may change, and it must become 0
        mha = _contribution_module(3, 6, False, 4)
        out = call(mha, x)
        with torch.no_grad():
            mha.W_value.weight[2:4] = 0.0  # head 1 = rows 2:4 of the (d_out, d_in) weight
        silenced = call(mha, x)
        if out.shape != (2, 3, 4, 6):
            raise Hint("fix the shape first (see the shape check)")
        others = [0, 2]
        if close(out[:, 1], torch.zeros(2, 4, 6), atol=1e-6):
            raise Hint(
                "head 1's contribution is already 0 before its values are silenced: each "
                "slice must be head_h @ W_O^(h), not zeros"
            )
        if not close(silenced[:, 1], torch.zeros(2, 4, 6), atol=1e-6) or not close(
            silenced[:, others], out[:, others], atol=1e-5
        ):
            raise Hint(
                "with head 1's values set to 0, slice 1 must be 0 and the other slices must "
                "not change: each head's contribution must depend on that head alone, not "
                "be a share of the whole output"
            )

    def other_heads():
        mha = _contribution_module(4, 8, True, 5)
        out = _sized(lambda: call(mha, x), "for 4 heads and d_out=8 your code fails: take "
                     "num_heads, head_dim and d_out from mha, not from the example")
        expected = _reference_contributions(mha, x).detach()
        if tuple(out.shape) != (2, 4, 4, 8) or not close(out, expected, atol=1e-5):
            raise Hint(
                "right for 3 heads but not for a causal module with 4 heads and d_out=8: take "
                "num_heads, head_dim and d_out from mha, not from the example"
            )

    return [
        ("heads + out_proj.bias add up to mha(x)", lambda: sums_to_output(False)),
        ("also with a causal mask", lambda: sums_to_output(True)),
        ("each slice depends on its own head only", one_head_each),
        ("works for 4 heads and d_out=8", other_heads),
        Guard("returns (B, num_heads, T, d_out)", shape),
    ]


# ---------------------------------------------------------------- ex-05-find-the-bug-heads
# Find the bug: `.view(B, num_heads, T, head_dim)` on a (B, T, d_out) projection runs without an
# error but gives each "head" a slice of consecutive numbers that spans several tokens; merging
# with the same `.view` undoes it, so the shapes look right and one head is even right.

HEADS_VIEW = (
    "heads split without the transpose: .view(B, num_heads, T, head_dim) cuts the (B, T, d_out) "
    "numbers in memory order, so each head mixes several tokens; split with .view(B, T, "
    "num_heads, head_dim).transpose(1, 2) and merge with .transpose(1, 2).reshape(B, T, d_out)"
)


def heads_context_reference(queries, keys, values, num_heads, split="ok", merge="ok", scale="head",
                            softmax_dim=-1):
    """Multi-head attention without projections on (B, T, d_out) inputs; keywords: a mistake."""
    B, T, d_out = queries.shape
    hd = d_out // num_heads

    def heads(t):
        if split == "no-transpose":
            return t.reshape(B, num_heads, t.shape[1], hd)
        return t.reshape(B, t.shape[1], num_heads, hd).transpose(1, 2)

    q, k, v = heads(queries), heads(keys), heads(values)
    divisor = {"head": hd ** 0.5, "d_out": d_out ** 0.5}[scale]
    context = torch.softmax(q @ k.transpose(-2, -1) / divisor, dim=softmax_dim) @ v  # (B, H, T, hd)
    if merge == "no-transpose":
        return context.reshape(B, T, d_out)
    return context.transpose(1, 2).reshape(B, T, d_out)


_HEADS_MISTAKES = (
    (dict(split="no-transpose", merge="no-transpose"), HEADS_VIEW),
    (dict(split="no-transpose"), "the split is still .view(B, num_heads, T, head_dim) without the "
     "transpose: split with .view(B, T, num_heads, head_dim).transpose(1, 2)"),
    (dict(merge="no-transpose"), "the split is right now, but the merge is not: (B, H, T, head_dim) "
     "reshaped straight to (B, T, d_out) mixes tokens and heads; .transpose(1, 2) first, then "
     ".reshape(B, T, d_out)"),
    (dict(scale="d_out"), "scale by sqrt(head_dim), the width of one head's queries and keys, not "
     "sqrt(d_out)"),
    (dict(softmax_dim=-2), "softmax over the wrong axis: each query's row sums to 1, dim=-1"),
)


@register("ex-05-find-the-bug-heads", "Find the bug: heads that mix tokens")
def heads_context(multihead_context):
    """Check the fixed ``multihead_context(queries, keys, values, num_heads)`` -> ``(B, T, d_out)``."""

    def case(B, T, d_out, num_heads, seed):
        generator = torch.Generator().manual_seed(seed)
        q, k, v = (torch.randn(B, T, d_out, generator=generator) for _ in range(3))
        try:
            out = multihead_context(q.clone(), k.clone(), v.clone(), num_heads)
        except RuntimeError as err:
            if "view size is not compatible" in str(err) or "contiguous" in str(err):
                raise Hint("after .transpose(1, 2) the tensor is not contiguous, so .view fails: use "
                           ".reshape(B, T, d_out) (or .contiguous().view(...))") from None
            raise
        if not isinstance(out, torch.Tensor):
            raise Hint(f"return a tensor, got {type(out).__name__}")
        want = heads_context_reference(q, k, v, num_heads)
        if out.shape != want.shape:
            merged = " (merge the heads back: (B, H, T, head_dim) -> (B, T, d_out))" if out.ndim == 4 else ""
            raise Hint(f"expected shape {tuple(want.shape)}, got {tuple(out.shape)}{merged}")
        if close(out, want):
            return
        for keywords, hint in _HEADS_MISTAKES:
            if close(out, heads_context_reference(q, k, v, num_heads, **keywords)):
                raise Hint(hint)
        raise Hint(f"with num_heads={num_heads} the output differs from multi-head attention: split "
                   "(B, T, d_out) -> (B, H, T, head_dim), softmax(q k^T / sqrt(head_dim)) v per head, "
                   "merge back")

    def unchanged():
        generator = torch.Generator().manual_seed(30)
        q, k, v = (torch.randn(2, 3, 4, generator=generator) for _ in range(3))
        copies = [t.clone() for t in (q, k, v)]
        multihead_context(*copies, 2)
        if not all(torch.equal(a, b) for a, b in zip(copies, (q, k, v))):
            raise Hint("your function changed its inputs in place; compute new tensors instead")

    return [
        ("2 heads, 5 tokens, d_out = 6", lambda: case(2, 5, 6, 2, 0)),
        ("3 heads on 3 tokens (T = num_heads)", lambda: case(2, 3, 6, 3, 1)),
        ("4 heads, one sequence of 7 tokens", lambda: case(1, 7, 8, 4, 2)),
        ("one head: ordinary attention", lambda: case(2, 4, 4, 1, 3)),
        Guard("leaves the inputs unchanged", unchanged),
    ]
