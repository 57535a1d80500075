"""Hidden tests of chapter 5 (instructor only: never copied to the book or the student release).

Format: see attention_book.instructor.hidden (and instructor/README.md). Each test gets the
student's namespace ``ns`` and raises Hint("what is wrong and how to fix it") when it fails.
"""

import torch

from attention_book.instructor.hidden import Hint, answer, hidden_test, randn, same


def _numbered(*shape, dtype=torch.float32):
    count = 1
    for size in shape:
        count *= size
    return torch.arange(count, dtype=dtype).view(*shape)


def _shape(result):
    return tuple(result.shape) if isinstance(result, torch.Tensor) else type(result).__name__


# ---------------------------------------------------------------- ex-05-split-heads


def _check_split_merge(split_heads, merge_heads, B, T, H, hd, dtype=torch.float32):
    x = _numbered(B, T, H * hd, dtype=dtype)
    heads = split_heads(x, H)
    if not isinstance(heads, torch.Tensor) or tuple(heads.shape) != (B, H, T, hd):
        raise Hint(f"split_heads of x with shape {(B, T, H * hd)} and num_heads={H} should return "
                   f"{(B, H, T, hd)}, got {_shape(heads)}: read every size from x.shape and num_heads "
                   "(no .squeeze(), no sizes from global variables)")
    if not torch.equal(heads, x.view(B, T, H, hd).transpose(1, 2)):
        raise Hint(f"for x of shape {(B, T, H * hd)} head h must hold columns h*{hd}:(h+1)*{hd} of every token")
    merged = merge_heads(heads)
    if not isinstance(merged, torch.Tensor) or tuple(merged.shape) != (B, T, H * hd):
        raise Hint(f"merge_heads of a {(B, H, T, hd)} tensor should return {(B, T, H * hd)}, got "
                   f"{_shape(merged)}: compute num_heads * head_dim from heads.shape, not from a global d_out")
    if not torch.equal(merged, x):
        raise Hint(f"merge_heads(split_heads(x)) should give back x for x of shape {(B, T, H * hd)}")
    if merged.dtype != dtype:
        raise Hint(f"the dtype changed from {dtype} to {merged.dtype}: view and transpose keep it")


@hidden_test("ex-05-split-heads", "one sequence of one token (B = T = 1)")
def split_single_token(ns):
    split_heads, merge_heads = answer(ns, "split_heads"), answer(ns, "merge_heads")
    _check_split_merge(split_heads, merge_heads, B=1, T=1, H=3, hd=2)
    _check_split_merge(split_heads, merge_heads, B=1, T=4, H=2, hd=5)


@hidden_test("ex-05-split-heads", "one head, head_dim 1 and float64")
def split_edge_widths(ns):
    split_heads, merge_heads = answer(ns, "split_heads"), answer(ns, "merge_heads")
    _check_split_merge(split_heads, merge_heads, B=3, T=2, H=1, hd=6, dtype=torch.float64)
    _check_split_merge(split_heads, merge_heads, B=2, T=3, H=4, hd=1, dtype=torch.float64)


@hidden_test("ex-05-split-heads", "gradients flow through split and merge", guard=True)
def split_gradients(ns):
    split_heads, merge_heads = answer(ns, "split_heads"), answer(ns, "merge_heads")
    x = torch.randn(2, 3, 8, generator=torch.Generator().manual_seed(5)).requires_grad_(True)
    upstream = torch.randn(2, 3, 8, generator=torch.Generator().manual_seed(6))
    merged = merge_heads(split_heads(x, 4))
    if not isinstance(merged, torch.Tensor) or merged.grad_fn is None:
        raise Hint("merge_heads(split_heads(x)) is cut off from x (no grad_fn): use view/transpose/reshape "
                   "on the tensor itself, not torch.tensor(...), .tolist(), .numpy() or .detach()")
    (merged * upstream).sum().backward()
    if x.grad is None or not torch.equal(x.grad, upstream):
        raise Hint("the gradient through split_heads and merge_heads should reach x unchanged (they only "
                   "move numbers around): use view and transpose on x itself")


# ---------------------------------------------------------------- ex-05-torch-twin


def _twin(session, d, num_heads, qkv_bias, causal, seed, T):
    x = torch.randn(3, T, d, generator=torch.Generator().manual_seed(T))
    result = session.probe("ch05.torch-twin", d=d, num_heads=num_heads, qkv_bias=qkv_bias, causal=causal, seed=seed, x=x)
    if result[0] != "MultiheadAttention":
        raise Hint(f"return a torch.nn.MultiheadAttention, got {result[0]}")
    return result


@hidden_test("ex-05-torch-twin", "other sizes: 12 features with 3 or 4 heads, T = 1 and T = 5")
def twin_other_sizes(student, reference):
    for num_heads, qkv_bias, causal, T in ((3, True, True, 5), (4, False, False, 1), (4, True, True, 1)):
        case = dict(d=12, num_heads=num_heads, qkv_bias=qkv_bias, causal=causal, seed=7 + num_heads, T=T)
        _, embed_dim, heads, got, _, _ = _twin(student, **case)
        if embed_dim != 12 or heads != num_heads:
            raise Hint(f"for a MultiHeadAttention with d_out=12 and {num_heads} heads your module has "
                       f"embed_dim={embed_dim}, num_heads={heads}: take both from "
                       "mha.d_out and mha.num_heads, do not hard-code them")
        expected = _twin(reference, **case)[3]
        if not isinstance(got, torch.Tensor) or got.shape != expected.shape or not torch.allclose(got, expected, atol=1e-5):
            raise Hint(f"outputs differ for d_out=12, {num_heads} heads, qkv_bias={qkv_bias}, causal={causal}, "
                       f"T={T}: copy every weight and bias of the query, key, value and output projections")

@hidden_test("ex-05-torch-twin", "our module is left unchanged and no tensor is shared", guard=True)
def twin_independent(student, reference):
    _, _, _, _, unchanged, shared = _twin(student, d=8, num_heads=2, qkv_bias=True, causal=False, seed=13, T=3)
    if not unchanged:
        raise Hint("to_torch_attention changed our module's parameters: copy from mha into the new "
                   "nn.MultiheadAttention (torch_mha....copy_(mha....)), never the other way")
    if shared:
        raise Hint(f"changing the returned module changed our {shared[0]}: it shares that tensor (assigning "
                   "a Parameter or module, e.g. torch_mha.out_proj.bias = mha.out_proj.bias); copy the "
                   "values with .copy_(...) inside torch.no_grad()")



# ---------------------------------------------------------------- ex-05-head-contributions

def _contributions(student, reference, seed, B, T, d_in, d_out, num_heads, causal):
    x = randn(B, T, d_in, seed=seed)
    case = dict(seed=seed, x=x, d_out=d_out, num_heads=num_heads, causal=causal)
    parts, whole, unchanged = student.probe("ch05.head-contributions", **case)
    want, _, _ = reference.probe("ch05.head-contributions", **case)
    what = f"head_contributions for B={B}, T={T}, d_out={d_out}, {num_heads} heads, causal={causal}"
    same(parts, want, what, hint="slice h is head h's output (its weights @ its own values) times its block "
         "of rows of out_proj.weight.T; keep the causal mask (take the weights from mha(x, return_weights=True))",
         atol=1e-5)
    return unchanged


@hidden_test("ex-05-head-contributions", "other sizes, causal and not, one token")
def contributions_sizes(student, reference):
    for seed, B, T, d_in, d_out, heads, causal in ((1, 2, 5, 6, 8, 4, True), (2, 1, 1, 3, 6, 3, False),
                                                   (3, 3, 4, 5, 4, 1, False)):
        _contributions(student, reference, seed, B, T, d_in, d_out, heads, causal)


@hidden_test("ex-05-head-contributions", "the module's weights are left unchanged", guard=True)
def contributions_read_only(student, reference):
    if not _contributions(student, reference, 4, 2, 3, 4, 6, 2, True):
        raise Hint("head_contributions changed mha's weights: only read them")


# ---------------------------------------------------------------- ex-05-find-the-bug-heads
# The code as given splits with .view(B, num_heads, T, head_dim): right for one head only. The
# first test is the exercise's main value test (the scorer's main-value rule).


def _heads_case(ns, B, T, d_out, num_heads, seed):
    from attention_book.checks.ch05 import _HEADS_MISTAKES, heads_context_reference

    multihead_context = answer(ns, "multihead_context")
    q, k, v = randn(B, T, d_out, seed=seed), randn(B, T, d_out, seed=seed + 1), randn(B, T, d_out, seed=seed + 2)
    result = multihead_context(q, k, v, num_heads)
    want = heads_context_reference(q, k, v, num_heads)
    if not isinstance(result, torch.Tensor) or tuple(result.shape) != tuple(want.shape):
        got = tuple(result.shape) if isinstance(result, torch.Tensor) else type(result).__name__
        raise Hint(f"num_heads={num_heads} on (B, T, d_out) = {(B, T, d_out)}: expected {tuple(want.shape)}, got {got}")
    if torch.allclose(result, want, atol=1e-5):
        return
    for keywords, hint in _HEADS_MISTAKES:
        if torch.allclose(result, heads_context_reference(q, k, v, num_heads, **keywords), atol=1e-5):
            raise Hint(hint)
    raise Hint(f"num_heads={num_heads}: the output differs from multi-head attention")


@hidden_test("ex-05-find-the-bug-heads", "several heads: 2 heads of 4, 6 heads of 2, 4 heads on 4 tokens", weight=2)
def heads_several(ns):
    _heads_case(ns, 3, 6, 8, 2, 70)
    _heads_case(ns, 1, 5, 12, 6, 73)
    _heads_case(ns, 2, 4, 8, 4, 76)


@hidden_test("ex-05-find-the-bug-heads", "one token, and one head")
def heads_edges(ns):
    _heads_case(ns, 2, 1, 6, 3, 79)
    _heads_case(ns, 2, 5, 3, 1, 82)


@hidden_test("ex-05-find-the-bug-heads", "the inputs stay unchanged", guard=True)
def heads_unchanged(ns):
    multihead_context = answer(ns, "multihead_context")
    multihead_context(randn(2, 3, 4, seed=85), randn(2, 3, 4, seed=86), randn(2, 3, 4, seed=87), 2)
    if multihead_context.mutated:
        raise Hint("your function changed its inputs in place; compute new tensors instead")
