"""Tests of attention_book.multihead (chapter 5): shapes, equivalences, source numbers, errors."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from helpers import in_ci
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from attention_book.attention import SelfAttention
from attention_book.causal import CausalAttention
from attention_book.data import journey_inputs
from attention_book.masks import causal_mask
from attention_book.multihead import (
    MultiHeadAttention,
    MultiHeadAttentionWrapper,
    merge_heads,
    split_heads,
)

FAST = settings(max_examples=25, deadline=None, derandomize=in_ci())  # same examples in CI


@st.composite
def configs(draw, equal_dims=False):
    """A small random multi-head configuration and a matching input batch."""
    num_heads = draw(st.integers(1, 4))
    head_dim = draw(st.integers(1, 4))
    d_out = num_heads * head_dim
    d_in = d_out if equal_dims else draw(st.integers(1, 6))
    batch_size = draw(st.integers(1, 3))
    num_tokens = draw(st.integers(1, 6))
    context_length = num_tokens + draw(st.integers(0, 3))
    causal = draw(st.booleans())
    qkv_bias = draw(st.booleans())
    seed = draw(st.integers(0, 2**16))
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(batch_size, num_tokens, d_in, generator=generator)
    torch.manual_seed(seed)
    return dict(d_in=d_in, d_out=d_out, context_length=context_length, num_heads=num_heads,
                causal=causal, qkv_bias=qkv_bias), x


def make_mha(config, cls=MultiHeadAttention):
    return cls(config["d_in"], config["d_out"], config["context_length"], 0.0, config["num_heads"],
               qkv_bias=config["qkv_bias"], causal=config["causal"]).eval()


def reference_attention(queries, keys, values, causal):
    """Textbook formula written independently of the package: softmax(QK^T/sqrt(d)) V."""
    num_tokens, head_dim = queries.shape[-2], queries.shape[-1]
    scores = queries @ keys.transpose(-2, -1) / math.sqrt(head_dim)
    if causal:
        future = torch.ones(num_tokens, num_tokens).triu(1).bool()
        scores = scores.masked_fill(future, float("-inf"))
    return torch.softmax(scores, dim=-1) @ values


def copy_into_torch(mha: MultiHeadAttention) -> nn.MultiheadAttention:
    """The chapter's exercise: our weights in PyTorch's own multi-head attention."""
    torch_mha = nn.MultiheadAttention(mha.d_out, mha.num_heads, bias=True, batch_first=True)
    with torch.no_grad():
        torch_mha.in_proj_weight.copy_(
            torch.cat([mha.W_query.weight, mha.W_key.weight, mha.W_value.weight]))
        if mha.W_query.bias is not None:
            torch_mha.in_proj_bias.copy_(
                torch.cat([mha.W_query.bias, mha.W_key.bias, mha.W_value.bias]))
        else:
            torch_mha.in_proj_bias.zero_()
        torch_mha.out_proj.weight.copy_(mha.out_proj.weight)
        torch_mha.out_proj.bias.copy_(mha.out_proj.bias)
    return torch_mha.eval()


# ---------------------------------------------------------------- equivalences (property tests)


@FAST
@given(configs())
def test_shapes_and_weights(case):
    config, x = case
    mha = make_mha(config)
    out, weights = mha(x, return_weights=True)
    B, T, _ = x.shape
    assert out.shape == (B, T, config["d_out"])
    assert weights.shape == (B, config["num_heads"], T, T)
    assert torch.allclose(weights.sum(-1), torch.ones(B, config["num_heads"], T), atol=1e-5)
    if config["causal"]:
        assert torch.all(weights.masked_select(causal_mask(T)) == 0)
    assert torch.equal(mha(x), out)
    wrapper_out, wrapper_weights = make_mha(config, MultiHeadAttentionWrapper)(x, return_weights=True)
    assert wrapper_out.shape == out.shape and wrapper_weights.shape == weights.shape


@FAST
@given(configs())
def test_one_head_equals_single_head_attention(case):
    config, x = case
    config["num_heads"] = 1
    mha = make_mha(config)
    with torch.no_grad():
        context = reference_attention(mha.W_query(x), mha.W_key(x), mha.W_value(x), config["causal"])
        expected = mha.out_proj(context)
    assert torch.allclose(mha(x), expected, atol=1e-5)
    # ... and the single-head modules of chapters 4 and 7 with the same weights give the same heads
    d_in, d_out, bias = config["d_in"], config["d_out"], config["qkv_bias"]
    if config["causal"]:
        single = CausalAttention(d_in, d_out, config["context_length"], 0.0, qkv_bias=bias)
    else:
        single = SelfAttention(d_in, d_out, qkv_bias=bias)
    single.load_state_dict({name: value for name, value in mha.state_dict().items()
                            if name.split(".")[0] in ("W_query", "W_key", "W_value")})
    with torch.no_grad():
        assert torch.allclose(mha(x), mha.out_proj(single(x)), atol=1e-5)


@FAST
@given(configs())
def test_heads_use_their_own_columns(case):
    """Head h of the efficient class is single-head attention on columns h*hd:(h+1)*hd."""
    config, x = case
    mha = make_mha(config)
    _, weights = mha(x, return_weights=True)
    hd = mha.head_dim
    with torch.no_grad():
        for h in range(mha.num_heads):
            cols = slice(h * hd, (h + 1) * hd)
            q, k = mha.W_query(x)[..., cols], mha.W_key(x)[..., cols]
            scores = q @ k.transpose(-2, -1) / math.sqrt(hd)
            if config["causal"]:
                scores = scores.masked_fill(causal_mask(x.shape[1]), float("-inf"))
            assert torch.allclose(weights[:, h], torch.softmax(scores, -1), atol=1e-5)


@FAST
@given(configs(equal_dims=True))
def test_equals_torch_multihead_attention(case):
    config, x = case
    mha = make_mha(config)
    torch_mha = copy_into_torch(mha)
    T = x.shape[1]
    attn_mask = causal_mask(T) if config["causal"] else None
    with torch.no_grad():
        expected, expected_weights = torch_mha(x, x, x, attn_mask=attn_mask, need_weights=True,
                                               average_attn_weights=False)
        out, weights = mha(x, return_weights=True)
    assert torch.allclose(out, expected, atol=1e-5)
    assert torch.allclose(weights, expected_weights, atol=1e-5)


@FAST
@given(configs())
def test_equals_functional_scaled_dot_product_attention(case):
    config, x = case
    mha = make_mha(config)
    B, T, _ = x.shape
    H, hd = mha.num_heads, mha.head_dim
    with torch.no_grad():
        q, k, v = (layer(x).view(B, T, H, hd).transpose(1, 2)
                   for layer in (mha.W_query, mha.W_key, mha.W_value))
        context = F.scaled_dot_product_attention(q, k, v, is_causal=config["causal"])
        expected = mha.out_proj(context.transpose(1, 2).reshape(B, T, H * hd))
        assert torch.allclose(mha(x), expected, atol=1e-5)


@FAST
@given(configs())
def test_wrapper_equals_efficient_class_after_copying_weights(case):
    config, x = case
    wrapper = make_mha(config, MultiHeadAttentionWrapper)
    mha = make_mha(config)
    hd = mha.head_dim
    with torch.no_grad():
        for h, head in enumerate(wrapper.heads):
            rows = slice(h * hd, (h + 1) * hd)  # nn.Linear stores (d_out, d_in): rows are outputs
            for name in ("W_query", "W_key", "W_value"):
                getattr(mha, name).weight[rows] = getattr(head, name).weight
                if config["qkv_bias"]:
                    getattr(mha, name).bias[rows] = getattr(head, name).bias
        # the wrapper only concatenates: an identity output projection makes the two comparable
        mha.out_proj.weight.copy_(torch.eye(config["d_out"]))
        mha.out_proj.bias.zero_()
        out, weights = mha(x, return_weights=True)
        wrapper_out, wrapper_weights = wrapper(x, return_weights=True)
    assert torch.allclose(wrapper_out, out, atol=1e-5)
    assert torch.allclose(wrapper_weights, weights, atol=1e-5)


def test_causal_output_ignores_future_tokens():
    torch.manual_seed(0)
    mha = MultiHeadAttention(4, 4, 6, 0.0, num_heads=2).eval()
    x = torch.randn(1, 6, 4)
    changed = x.clone()
    changed[:, 4:] = torch.randn(1, 2, 4)  # change the last two tokens only
    assert torch.allclose(mha(x)[:, :4], mha(changed)[:, :4])
    bidirectional = MultiHeadAttention(4, 4, 6, 0.0, num_heads=2, causal=False).eval()
    assert not torch.allclose(bidirectional(x)[:, :4], bidirectional(changed)[:, :4])


# ---------------------------------------------------------------- the source's printed numbers

JOURNEY_WRAPPER = [[-0.4519, 0.2216, 0.4772, 0.1063], [-0.5874, 0.0058, 0.5891, 0.3257],
                   [-0.6300, -0.0632, 0.6202, 0.3860], [-0.5675, -0.0843, 0.5478, 0.3589],
                   [-0.5526, -0.0981, 0.5321, 0.3428], [-0.5299, -0.1081, 0.5077, 0.3493]]
JOURNEY_MHA = [[0.3190, 0.4858], [0.2943, 0.3897], [0.2856, 0.3593],
               [0.2693, 0.3873], [0.2639, 0.3928], [0.2575, 0.4028]]


def journey_batch():
    _, inputs = journey_inputs()
    return torch.stack((inputs, inputs), dim=0)  # (2, 6, 3)


def test_wrapper_reproduces_source_001():
    batch = journey_batch()
    torch.manual_seed(123)
    # the source passes the per-head size d_out=2; our d_out is the concatenated size 2 * 2
    wrapper = MultiHeadAttentionWrapper(3, 4, 6, 0.0, num_heads=2)
    out = wrapper(batch)
    assert out.shape == (2, 6, 4)
    for b in range(2):
        assert torch.allclose(out[b], torch.tensor(JOURNEY_WRAPPER), atol=1e-4)


def test_multihead_reproduces_source_001():
    batch = journey_batch()
    torch.manual_seed(123)
    out = MultiHeadAttention(3, 2, 6, 0.0, num_heads=2)(batch)
    assert out.shape == (2, 6, 2)
    for b in range(2):
        assert torch.allclose(out[b], torch.tensor(JOURNEY_MHA), atol=1e-4)


# ---------------------------------------------------------------- modules behave like modules


def test_mask_is_a_buffer_only_when_causal():
    causal = MultiHeadAttention(4, 4, 5, 0.0, 2)
    assert "mask" in dict(causal.named_buffers())
    assert "mask" in causal.state_dict()
    assert "mask" not in MultiHeadAttention(4, 4, 5, 0.0, 2, causal=False).state_dict()
    assert not any("mask" in name for name, _ in causal.named_parameters())
    assert causal.out_proj.bias is not None and causal.W_query.bias is None
    assert MultiHeadAttention(4, 4, 5, 0.0, 2, qkv_bias=True).W_value.bias is not None


def test_wrapper_heads_are_the_single_head_modules_of_chapter_4():
    for causal in (True, False):
        wrapper = MultiHeadAttentionWrapper(3, 4, 6, 0.1, num_heads=2, causal=causal)
        assert all(type(head) is SelfAttention for head in wrapper.heads)
        assert [head.W_query.out_features for head in wrapper.heads] == [2, 2]
    assert set(wrapper.state_dict()) == {f"heads.{h}.W_{part}.weight" for h in (0, 1)
                                         for part in ("query", "key", "value")}


def test_wrapper_heads_equal_chapter_7_causal_heads_with_the_same_weights():
    torch.manual_seed(4)
    wrapper = MultiHeadAttentionWrapper(3, 4, 6, 0.0, num_heads=2).eval()
    x = torch.randn(2, 5, 3)
    out, weights = wrapper(x, return_weights=True)
    for h, head in enumerate(wrapper.heads):
        single = CausalAttention(3, 2, 6, 0.0)
        single.load_state_dict(head.state_dict())
        context, head_weights = single(x, return_weights=True)
        assert torch.equal(out[..., 2 * h:2 * h + 2], context)
        assert torch.equal(weights[:, h], head_weights)


def test_wrapper_dropout_draws_like_one_causal_head_after_another():
    """Same seed, same dropped weights as the LLM-from-scratch wrapper of CausalAttention heads."""
    torch.manual_seed(5)
    wrapper = MultiHeadAttentionWrapper(3, 4, 6, 0.5, num_heads=2).train()
    x = torch.randn(1, 6, 3)
    singles = []
    for head in wrapper.heads:
        single = CausalAttention(3, 2, 6, 0.5).train()
        single.load_state_dict(head.state_dict())
        singles.append(single)
    torch.manual_seed(6)
    out = wrapper(x)
    torch.manual_seed(6)
    expected = torch.cat([single(x) for single in singles], dim=-1)
    assert torch.equal(out, expected)
    bidirectional = MultiHeadAttentionWrapper(3, 4, 6, 0.5, num_heads=2, causal=False).train()
    _, weights = bidirectional(x, return_weights=True)
    assert (weights == 0).any()  # dropout now works without the causal mask too


def test_parameter_counts_match_between_wrapper_and_efficient_class():
    d, heads = 12, 3
    wrapper = MultiHeadAttentionWrapper(d, d, 8, 0.0, heads)
    mha = MultiHeadAttention(d, d, 8, 0.0, heads)
    count = lambda module: sum(p.numel() for p in module.parameters())  # noqa: E731
    assert count(wrapper) == 3 * d * d
    assert count(mha) == 3 * d * d + d * d + d  # + output projection


def test_dropout_acts_in_training_only():
    torch.manual_seed(1)
    mha = MultiHeadAttention(8, 8, 6, 0.5, num_heads=2)
    x = torch.randn(2, 6, 8)
    mha.train()
    _, weights = mha(x, return_weights=True)
    assert (weights == 0).any() and weights.max() > 1.0  # dropped and rescaled by 1 / (1 - p)
    mha.eval()
    assert torch.equal(mha(x), mha(x))


def test_gradients_reach_every_parameter():
    torch.manual_seed(2)
    for cls in (MultiHeadAttention, MultiHeadAttentionWrapper):
        module = cls(3, 4, 6, 0.0, num_heads=2, qkv_bias=True)
        module(torch.randn(2, 6, 3)).sum().backward()
        for name, parameter in module.named_parameters():
            assert parameter.grad is not None and parameter.grad.abs().sum() > 0, name


# ---------------------------------------------------------------- errors say how to fix them


@settings(max_examples=40, deadline=None, derandomize=in_ci())
@given(st.integers(1, 64), st.integers(1, 16))
def test_indivisible_d_out_names_num_heads_that_work(d_out, num_heads):
    if d_out % num_heads == 0:
        assert MultiHeadAttention(3, d_out, 4, 0.0, num_heads).head_dim == d_out // num_heads
        return
    for cls in (MultiHeadAttention, MultiHeadAttentionWrapper):
        with pytest.raises(ValueError) as info:
            cls(3, d_out, 4, 0.0, num_heads)
        message = str(info.value)
        assert f"d_out={d_out}" in message and f"num_heads={num_heads}" in message
        suggested = message.split("choose num_heads from (")[1].split(")")[0]
        suggested = [int(k) for k in suggested.split(",") if k.strip()]
        assert suggested == [k for k in range(1, d_out + 1) if d_out % k == 0]
        for k in suggested:  # every suggestion works
            cls(3, d_out, 4, 0.0, k)


@pytest.mark.parametrize("cls", [MultiHeadAttention, MultiHeadAttentionWrapper])
@pytest.mark.parametrize(
    "x, fragment",
    [
        (torch.zeros(5, 3), "x.unsqueeze(0)"),
        (torch.zeros(1, 1, 5, 3), "x.squeeze(0)"),
        (torch.zeros(2, 1, 5, 3), "reshape it to (B, T, d_in)"),
        (torch.zeros(1, 5, 4), "d_in=3"),
        (torch.zeros(1, 9, 3), "context_length=6"),
        (torch.zeros(1, 5, 3, dtype=torch.long), "nn.Embedding"),
        ([[0.0, 1.0, 2.0]], "torch.Tensor"),
    ],
)
def test_bad_input_says_how_to_fix(cls, x, fragment):
    module = cls(3, 4, 6, 0.0, 2)
    with pytest.raises((ValueError, TypeError)) as info:
        module(x)
    assert fragment in str(info.value)


@pytest.mark.parametrize(
    "kwargs, fragment",
    [
        (dict(num_heads=0), "num_heads must be a positive int, got 0"),
        (dict(num_heads=2.0), "num_heads must be a positive int, got 2.0 (float)"),
        (dict(dropout=1.0), "dropout must be a probability in [0, 1)"),
        (dict(context_length=0), "context_length must be a positive int, got 0"),
        (dict(causal="yes"), "causal must be True or False"),
    ],
)
def test_bad_configuration_is_explained(kwargs, fragment):
    arguments = dict(d_in=3, d_out=4, context_length=6, dropout=0.0, num_heads=2) | kwargs
    with pytest.raises((ValueError, TypeError)) as info:
        MultiHeadAttention(**arguments)
    assert fragment in str(info.value)


def test_state_dict_has_the_llm_book_names_and_loads_its_float_mask():
    """The LLM-from-scratch book stores the mask as a float triu buffer named "mask"."""
    torch.manual_seed(3)
    mha = MultiHeadAttention(4, 4, 5, 0.0, num_heads=2)
    book_names = {"mask", "W_query.weight", "W_key.weight", "W_value.weight",
                  "out_proj.weight", "out_proj.bias"}
    assert set(mha.state_dict()) == book_names
    book_state = {name: torch.randn_like(value.float()) for name, value in mha.state_dict().items()}
    book_state["mask"] = torch.triu(torch.ones(5, 5), diagonal=1)
    mha.load_state_dict(book_state)  # strict: same keys, float mask converted to bool
    assert mha.mask.dtype == torch.bool and torch.equal(mha.mask, causal_mask(5))
    assert torch.equal(mha.W_key.weight, book_state["W_key.weight"])


def test_follows_the_module_to_another_dtype_and_device():
    mha = MultiHeadAttention(4, 4, 5, 0.0, num_heads=2).to(torch.float64)
    out = mha(torch.randn(1, 5, 4, dtype=torch.float64))
    assert out.dtype == torch.float64 and mha.mask.dtype == torch.bool


# ---------------------------------------------------------------- one module: self, cross, causal, padding
# With CI=true hypothesis draws the same examples on every run (derandomize).
EQUIVALENCE = settings(max_examples=30, deadline=None, derandomize=in_ci())


def torch_twin(mha: MultiHeadAttention) -> nn.MultiheadAttention:
    """nn.MultiheadAttention with our weights; kdim = vdim = our kdim (keys and values share context)."""
    twin = nn.MultiheadAttention(mha.d_out, mha.num_heads, bias=True, batch_first=True,
                                 kdim=mha.kdim, vdim=mha.kdim)
    with torch.no_grad():
        if twin._qkv_same_embed_dim:
            twin.in_proj_weight.copy_(torch.cat([mha.W_query.weight, mha.W_key.weight, mha.W_value.weight]))
        else:
            twin.q_proj_weight.copy_(mha.W_query.weight)
            twin.k_proj_weight.copy_(mha.W_key.weight)
            twin.v_proj_weight.copy_(mha.W_value.weight)
        biases = [layer.bias for layer in (mha.W_query, mha.W_key, mha.W_value)]
        twin.in_proj_bias.copy_(torch.cat(biases) if biases[0] is not None else torch.zeros(3 * mha.d_out))
        twin.out_proj.weight.copy_(mha.out_proj.weight)
        twin.out_proj.bias.copy_(mha.out_proj.bias)
    return twin.eval()


@st.composite
def attention_cases(draw):
    """A random module (self or cross, causal or not) with inputs and a random key padding mask.

    nn.MultiheadAttention projects queries from embed_dim = d_out, so d_in = d_out here."""
    num_heads, head_dim = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    d_out = num_heads * head_dim
    cross = draw(st.booleans())
    causal = False if cross else draw(st.booleans())
    kdim = draw(st.integers(1, 7)) if cross else None
    batch, t_q = draw(st.integers(1, 3)), draw(st.integers(1, 6))
    t_k = draw(st.integers(1, 7)) if cross else t_q
    seed = draw(st.integers(0, 2**16))
    generator = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    mha = MultiHeadAttention(d_out, d_out, 8, 0.0, num_heads, qkv_bias=draw(st.booleans()),
                             causal=causal, kdim=kdim).eval()
    x = torch.randn(batch, t_q, d_out, generator=generator)
    context = torch.randn(batch, t_k, kdim, generator=generator) if cross else None
    padding = torch.rand(batch, t_k, generator=generator) < draw(st.sampled_from([0.0, 0.3, 0.7, 1.0]))
    return mha, x, context, padding


@EQUIVALENCE
@given(attention_cases(), st.booleans())
def test_equals_torch_multihead_attention_for_self_cross_causal_and_padding(case, use_padding):
    mha, x, context, padding = case
    source = x if context is None else context
    key_padding_mask = padding if use_padding else None
    attn_mask = causal_mask(x.shape[1]) if mha.causal else None
    with torch.no_grad():
        out, weights = mha(x, context, key_padding_mask=key_padding_mask, return_weights=True)
        expected, expected_weights = torch_twin(mha)(x, source, source, key_padding_mask=key_padding_mask,
                                                      attn_mask=attn_mask, need_weights=True,
                                                      average_attn_weights=False)
    hidden = torch.zeros(x.shape[0], x.shape[1], source.shape[1], dtype=torch.bool)  # (B, T_q, T_k)
    if attn_mask is not None:
        hidden = hidden | attn_mask
    if key_padding_mask is not None:
        hidden = hidden | key_padding_mask[:, None, :]
    has_a_key = ~hidden.all(dim=-1)  # (B, T_q)
    # nn.MultiheadAttention returns NaN for a query whose keys are all padding; our rule gives
    # zero weights there. So compare only the rows with at least one visible key ...
    assert torch.allclose(out[has_a_key], expected[has_a_key], atol=1e-5)
    assert torch.allclose(weights.transpose(1, 2)[has_a_key], expected_weights.transpose(1, 2)[has_a_key],
                          atol=1e-5)
    # ... and check the rule on the others: zero weights, so the output is out_proj's bias.
    assert torch.all(weights.transpose(1, 2)[~has_a_key] == 0)
    assert torch.allclose(out[~has_a_key], mha.out_proj.bias.expand_as(out[~has_a_key]))
    assert not torch.isnan(out).any()


@EQUIVALENCE
@given(attention_cases())
def test_padding_never_gives_nan_gradients(case):
    mha, x, context, padding = case
    padding[0] = True  # the first sequence is all padding
    x = x.clone().requires_grad_(True)
    mha(x, context, key_padding_mask=padding).sum().backward()
    assert torch.isfinite(x.grad).all()
    assert all(torch.isfinite(p.grad).all() for p in mha.parameters() if p.grad is not None)


@EQUIVALENCE
@given(attention_cases())
def test_attn_mask_equals_the_same_mask_as_key_padding(case):
    mha, x, context, padding = case
    as_attn_mask = padding[:, None, None, :].expand(-1, 1, x.shape[1], -1)  # (B, 1, T_q, T_k)
    with torch.no_grad():
        assert torch.equal(mha(x, context, attn_mask=as_attn_mask), mha(x, context, key_padding_mask=padding))


def test_causal_flag_and_padding_combine():
    """Left padding under a causal mask: the padding query sees nothing (zeros), the others see
    their past minus the padding."""
    torch.manual_seed(0)
    mha = MultiHeadAttention(4, 4, 6, 0.0, num_heads=2).eval()
    x = torch.randn(1, 4, 4)
    padding = torch.tensor([[True, False, False, False]])  # "<pad> Life is short"
    out, weights = mha(x, key_padding_mask=padding, return_weights=True)
    assert torch.all(weights[0, :, 0] == 0)  # query 0: every key is future or padding
    assert torch.allclose(out[0, 0], mha.out_proj.bias)
    visible = ~(causal_mask(4) | padding)  # (4, 4)
    assert torch.all(weights[0][:, ~visible] == 0)
    assert torch.allclose(weights[0, :, 1:].sum(-1), torch.ones(2, 3))
    # the padded token changes nothing for the others, and the future still changes nothing
    changed = x.clone()
    changed[0, 0] += 5.0
    assert torch.allclose(mha(changed, key_padding_mask=padding)[0, 1:], out[0, 1:], atol=1e-6)


def test_decoder_layer_from_one_class():
    """Causal self-attention, then cross-attention to a padded encoder output of another width."""
    torch.manual_seed(1)
    self_attention = MultiHeadAttention(8, 8, 10, 0.0, num_heads=2).eval()
    cross_attention = MultiHeadAttention(8, 8, 10, 0.0, num_heads=2, causal=False, kdim=5).eval()
    decoder_tokens, encoder_output = torch.randn(2, 6, 8), torch.randn(2, 9, 5)
    encoder_padding = torch.zeros(2, 9, dtype=torch.bool)
    encoder_padding[1, 4:] = True  # the second source sentence has 4 tokens
    hidden = decoder_tokens + self_attention(decoder_tokens)
    out, weights = cross_attention(hidden, encoder_output, key_padding_mask=encoder_padding,
                                   return_weights=True)
    assert out.shape == (2, 6, 8) and weights.shape == (2, 2, 6, 9)
    assert torch.all(weights[1, :, :, 4:] == 0)
    changed = encoder_output.clone()
    changed[1, 4:] = 100.0  # whatever sits under padding does not matter
    assert torch.allclose(cross_attention(hidden, changed, key_padding_mask=encoder_padding), out, atol=1e-6)


def test_kdim_gives_key_and_value_projections_their_own_width():
    torch.manual_seed(2)
    mha = MultiHeadAttention(4, 6, 5, 0.0, num_heads=3, causal=False, kdim=7)
    assert mha.W_query.in_features == 4 and mha.W_key.in_features == 7 and mha.W_value.in_features == 7
    assert "kdim=7" in repr(mha)
    out = mha(torch.randn(2, 5, 4), torch.randn(2, 11, 7))  # T_k = 11 > context_length: allowed
    assert out.shape == (2, 5, 6)


def test_without_kdim_the_weights_are_still_the_llm_books():
    """kdim=None creates the same parameters in the same order: same seed, same numbers."""
    torch.manual_seed(123)
    first = MultiHeadAttention(3, 2, 6, 0.0, num_heads=2)
    torch.manual_seed(123)
    second = MultiHeadAttention(3, 2, 6, 0.0, num_heads=2, kdim=3)
    assert all(torch.equal(a, b) for a, b in zip(first.state_dict().values(), second.state_dict().values()))


def test_split_and_merge_heads_are_inverse_and_use_column_blocks():
    x = torch.arange(2 * 3 * 6, dtype=torch.float32).view(2, 3, 6)  # (B, T, d_out)
    heads = split_heads(x, 3)  # (B, H, T, hd)
    assert heads.shape == (2, 3, 3, 2)
    assert torch.equal(heads[:, 1], x[..., 2:4])  # head 1 = columns 2:4
    assert torch.equal(merge_heads(heads), x)
