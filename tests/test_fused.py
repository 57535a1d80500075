"""attention_book.fused (chapter 10): the fused module equals the from-scratch one."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from attention_book.functional import scaled_dot_product_attention
from attention_book.fused import (
    FusedMultiHeadAttention,
    direct_sdpa,
    naive_causal_attention,
)
from attention_book.masks import causal_mask
from attention_book.multihead import MultiHeadAttention

FAST = settings(max_examples=25, deadline=None)


@st.composite
def configs(draw):
    num_heads = draw(st.integers(1, 4))
    d_out = num_heads * draw(st.integers(1, 8))
    num_tokens = draw(st.integers(1, 9))
    seed = draw(st.integers(0, 2**16))
    config = dict(d_in=draw(st.integers(1, 8)), d_out=d_out,
                  context_length=num_tokens + draw(st.integers(0, 3)),
                  dropout=0.0, num_heads=num_heads,
                  qkv_bias=draw(st.booleans()), causal=draw(st.booleans()))
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(draw(st.integers(1, 3)), num_tokens, config["d_in"],
                    generator=generator)
    torch.manual_seed(seed)
    return config, x


@FAST
@given(configs())
def test_fused_equals_from_scratch(case):
    config, x = case
    scratch = MultiHeadAttention(**config)
    fused = FusedMultiHeadAttention(**config)
    fused.load_state_dict(scratch.state_dict())
    torch.testing.assert_close(fused(x), scratch(x), atol=1e-5, rtol=1e-5)


@FAST
@given(configs())
def test_fused_gradients_equal_from_scratch(case):
    config, x = case
    scratch = MultiHeadAttention(**config)
    fused = FusedMultiHeadAttention.from_module(scratch)
    x1, x2 = x.clone().requires_grad_(), x.clone().requires_grad_()
    scratch(x1).square().sum().backward()
    fused(x2).square().sum().backward()
    torch.testing.assert_close(x2.grad, x1.grad, atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(fused.W_query.weight.grad,
                               scratch.W_query.weight.grad, atol=1e-5, rtol=1e-4)


def test_fused_keeps_no_mask_buffer_but_loads_a_from_scratch_state_dict():
    # issue 11: the fused module carried a (T, T) mask it never read
    scratch = MultiHeadAttention(4, 4, 64, 0.0, 2)
    fused = FusedMultiHeadAttention(4, 4, 64, 0.0, 2)
    assert dict(fused.named_buffers()) == {}
    assert "mask" not in fused.state_dict()
    fused.load_state_dict(scratch.state_dict())  # strict: nothing missing
    learned = [k for k in scratch.state_dict() if k != "mask"]
    assert list(fused.state_dict()) == learned


def test_fused_in_eval_mode_ignores_dropout():
    torch.manual_seed(0)
    scratch = MultiHeadAttention(6, 6, 5, dropout=0.5, num_heads=2).eval()
    fused = FusedMultiHeadAttention.from_module(scratch)
    assert not fused.training
    x = torch.randn(2, 5, 6)
    torch.testing.assert_close(fused(x), scratch(x), atol=1e-5, rtol=1e-5)


def test_fused_dropout_is_active_in_training_mode():
    torch.manual_seed(0)
    fused = FusedMultiHeadAttention(6, 6, 5, dropout=0.5, num_heads=2)
    x = torch.randn(2, 5, 6)
    torch.manual_seed(1)
    first = fused(x)
    torch.manual_seed(2)
    second = fused(x)
    assert not torch.allclose(first, second)
    torch.testing.assert_close(fused.eval()(x), fused(x))


def test_direct_sdpa_equals_fused_module():
    torch.manual_seed(3)
    fused = FusedMultiHeadAttention(8, 12, 7, 0.0, num_heads=3, qkv_bias=True)
    x = torch.randn(2, 7, 8)
    torch.testing.assert_close(direct_sdpa(fused, x), fused(x))


def test_naive_causal_attention_equals_the_core_and_sdpa():
    # the chapter writes these lines out on purpose: they must equal the core
    generator = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 3, 7, 4, generator=generator) for _ in range(3))
    core, _ = scaled_dot_product_attention(q, k, v, mask=causal_mask(7))
    torch.testing.assert_close(naive_causal_attention(q, k, v), core,
                               atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(
        F.scaled_dot_product_attention(q, k, v, is_causal=True), core,
        atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("call, error, message", [
    (lambda f: f(torch.randn(1, 3, 4), return_weights=True), ValueError,
     "MultiHeadAttention with the same state_dict"),
    (lambda f: f(torch.randn(1, 3, 4), return_weights="yes"), TypeError,
     "return_weights"),
    (lambda f: f(torch.randn(1, 5, 4)), ValueError, "context_length"),
    (lambda f: f(torch.randn(1, 3, 5)), ValueError, "d_in=4"),
    (lambda f: f(torch.randn(3, 4)), ValueError, "unsqueeze"),
    (lambda f: f(torch.ones(1, 3, 4, dtype=torch.long)), TypeError,
     "floating-point"),
    (lambda f: f(torch.randn(1, 3, 4, dtype=torch.float64)), TypeError,
     "dtype"),
    (lambda f: f([[1.0]]), TypeError, "torch.Tensor"),
    (lambda f: f(torch.randn(1, 3, 4), context=torch.randn(1, 3, 4)),
     ValueError, "context"),
    (lambda f: f(torch.randn(1, 3, 4),
                 key_padding_mask=torch.zeros(1, 3, dtype=torch.bool)),
     ValueError, "key_padding_mask"),
])
def test_fused_bad_input_names_the_argument_and_the_fix(call, error, message):
    fused = FusedMultiHeadAttention(4, 4, 3, 0.0, 2)
    with pytest.raises(error, match=message):
        call(fused)


def test_from_module_rejects_other_modules():
    with pytest.raises(TypeError, match="MultiHeadAttention"):
        FusedMultiHeadAttention.from_module(torch.nn.Linear(3, 3))


def test_from_module_copies_dtype_and_mode():
    scratch = MultiHeadAttention(4, 4, 3, 0.1, 2).double().eval()
    fused = FusedMultiHeadAttention.from_module(scratch)
    assert fused.W_key.weight.dtype == torch.float64 and not fused.training
    x = torch.randn(1, 3, 4, dtype=torch.float64)
    torch.testing.assert_close(fused(x), scratch(x))


def test_fast_check_falls_back_to_the_full_checks():
    # the forward pass checks x with a few comparisons; whatever fails them gets the full checks
    fused = FusedMultiHeadAttention(4, 4, 3, 0.0, 2)
    with pytest.raises(ValueError, match="unsqueeze"):
        fused(torch.randn(3, 4))
    with pytest.raises(ValueError, match="device"):
        fused(torch.randn(1, 3, 4, device="meta"))

    class Marked(torch.Tensor):  # a subclass takes the full checks and then runs
        pass

    x = torch.randn(1, 3, 4)
    torch.testing.assert_close(fused(x.as_subclass(Marked)).as_subclass(torch.Tensor), fused(x))
