"""Unit and property tests of attention_book.cross (chapter 6)."""

import math

import pytest
import torch
import torch.nn.functional as F
from helpers import in_ci
from hypothesis import given, settings
from hypothesis import strategies as st

from attention_book.cross import CrossAttention, padded_softmax

SETTINGS = settings(max_examples=30, deadline=None, derandomize=in_ci())  # same examples in CI


@st.composite
def cross_cases(draw, batched=None):
    """Random sizes and a seed: (module, x, context, key_padding_mask or None)."""
    batch = draw(st.sampled_from([None, 1, 3])) if batched is None else (3 if batched else None)
    t_q, t_kv = draw(st.integers(1, 7)), draw(st.integers(1, 9))
    d_in, d_context = draw(st.integers(1, 6)), draw(st.integers(1, 6))
    d_kq, d_v = draw(st.integers(1, 5)), draw(st.integers(1, 5))
    bias = draw(st.booleans())
    seed = draw(st.integers(0, 2**16))
    generator = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    module = CrossAttention(d_in, d_kq, d_v, qkv_bias=bias, d_context=d_context)
    lead = () if batch is None else (batch,)
    x = torch.randn(*lead, t_q, d_in, generator=generator)
    context = torch.randn(*lead, t_kv, d_context, generator=generator)
    mask = torch.rand(*lead, t_kv, generator=generator) < draw(st.sampled_from([0.0, 0.3, 0.7, 1.0]))
    return module, x, context, mask


def reference(module, x, context, key_padding_mask=None):
    """Cross-attention written with explicit x @ W matrices (the book's convention)."""
    W_query, W_key, W_value = (getattr(module, name).weight.T for name in ("W_query", "W_key", "W_value"))
    queries, keys, values = x @ W_query, context @ W_key, context @ W_value
    if module.W_query.bias is not None:
        queries, keys, values = queries + module.W_query.bias, keys + module.W_key.bias, values + module.W_value.bias
    scores = queries @ keys.transpose(-2, -1) / math.sqrt(keys.shape[-1])
    if key_padding_mask is not None:
        scores = scores.masked_fill(key_padding_mask.unsqueeze(-2), float("-inf"))
    weights = torch.nan_to_num(torch.softmax(scores, dim=-1), nan=0.0)  # fully masked rows -> 0
    return weights @ values, weights


# --- properties ----------------------------------------------------------------------------------


@SETTINGS
@given(cross_cases())
def test_matches_explicit_matrices(case):
    module, x, context, mask = case
    out, weights = module(x, context, key_padding_mask=mask, return_weights=True)
    expected_out, expected_weights = reference(module, x, context, mask)
    assert out.shape == (*x.shape[:-1], module.d_out_v)
    assert weights.shape == (*x.shape[:-1], context.shape[-2])
    torch.testing.assert_close(weights, expected_weights)
    torch.testing.assert_close(out, expected_out)


@SETTINGS
@given(cross_cases())
def test_rows_sum_to_one_without_mask(case):
    module, x, context, _ = case
    _, weights = module(x, context, return_weights=True)
    torch.testing.assert_close(weights.sum(dim=-1), torch.ones(weights.shape[:-1]))
    assert (weights >= 0).all()


@SETTINGS
@given(cross_cases())
def test_padding_gets_zero_weight_and_rows_stay_normalised(case):
    module, x, context, mask = case
    _, weights = module(x, context, key_padding_mask=mask, return_weights=True)
    query_axis_mask = mask.unsqueeze(-2).expand_as(weights)  # (..., T_q, T_kv)
    assert (weights[query_axis_mask] == 0).all()
    fully_masked = mask.all(dim=-1, keepdim=True).expand(weights.shape[:-1])  # (..., T_q)
    sums = weights.sum(dim=-1)
    torch.testing.assert_close(sums[~fully_masked], torch.ones_like(sums[~fully_masked]))
    assert (sums[fully_masked] == 0).all()


@pytest.mark.filterwarnings("ignore:Anomaly Detection has been enabled")
@settings(max_examples=15, deadline=None, derandomize=in_ci())
@given(cross_cases())
def test_fully_masked_rows_are_finite_in_forward_and_backward(case):
    module, x, context, _ = case
    mask = torch.ones(context.shape[:-1], dtype=torch.bool)  # every key is padding
    x = x.clone().requires_grad_(True)
    context = context.clone().requires_grad_(True)
    with torch.autograd.detect_anomaly(check_nan=True):
        out, weights = module(x, context, key_padding_mask=mask, return_weights=True)
    assert torch.isfinite(out).all() and torch.isfinite(weights).all()
    assert (out == 0).all() and (weights == 0).all()
    # Anomaly mode raises if any backward step returns NaN, even one a later step would discard.
    with torch.autograd.detect_anomaly(check_nan=True):
        out.sum().backward()
    for tensor in (x.grad, context.grad, *(p.grad for p in module.parameters())):
        assert tensor is None or torch.isfinite(tensor).all()


@SETTINGS
@given(cross_cases())
def test_cross_with_itself_is_self_attention(case):
    module, x, _, _ = case
    from attention_book.attention import SelfAttention

    cross = CrossAttention(module.d_in, module.d_out_kq, module.d_out_v, qkv_bias=module.W_query.bias is not None)
    self_attention = SelfAttention(cross.d_in, cross.d_out_kq, cross.d_out_v, qkv_bias=cross.W_query.bias is not None)
    self_attention.load_state_dict(cross.state_dict())  # same parameter names, same shapes
    torch.testing.assert_close(cross(x, x), self_attention(x))


@SETTINGS
@given(cross_cases(batched=True))
def test_equals_torch_scaled_dot_product_attention(case):
    module, x, context, mask = case
    out = module(x, context, key_padding_mask=mask)
    queries, keys, values = module.W_query(x), module.W_key(context), module.W_value(context)
    # SDPA's boolean attn_mask means the opposite: True = "may attend"
    expected = F.scaled_dot_product_attention(queries, keys, values, attn_mask=~mask[:, None, :])
    torch.testing.assert_close(out, expected)


@SETTINGS
@given(cross_cases(batched=True))
def test_batch_items_are_independent(case):
    module, x, context, mask = case
    batched = module(x, context, key_padding_mask=mask)
    for index in range(x.shape[0]):
        single = module(x[index], context[index], key_padding_mask=mask[index])
        torch.testing.assert_close(batched[index], single)


@SETTINGS
@given(st.integers(1, 6), st.integers(1, 8), st.integers(0, 1000))
def test_padded_softmax_ignores_padded_scores(t_q, t_kv, seed):
    generator = torch.Generator().manual_seed(seed)
    scores = torch.randn(2, t_q, t_kv, generator=generator)
    mask = torch.rand(2, t_kv, generator=generator) < 0.5
    changed = scores.masked_fill(mask[:, None, :], 1e4)  # whatever sits under padding
    torch.testing.assert_close(padded_softmax(scores, mask), padded_softmax(changed, mask))


# --- the worked example of the chapter -----------------------------------------------------------


def test_source_numbers_with_copied_weights():
    """Source 000's CrossAttention (seed 123, torch.rand weights) gives its printed context vectors."""
    from attention_book.data import life_inputs

    _, _, embedded_sentence = life_inputs()
    torch.manual_seed(123)
    W_query, W_key, W_value = torch.rand(3, 2), torch.rand(3, 2), torch.rand(3, 4)
    second_input = torch.rand(8, 3)
    cross = CrossAttention(3, 2, 4)
    with torch.no_grad():
        cross.W_query.weight.copy_(W_query.T)
        cross.W_key.weight.copy_(W_key.T)
        cross.W_value.weight.copy_(W_value.T)
    out = cross(embedded_sentence, second_input)
    printed = torch.tensor(
        [
            [0.4231, 0.8665, 0.6503, 1.0042],
            [0.4874, 0.9718, 0.7359, 1.1353],
            [0.4054, 0.8359, 0.6258, 0.9667],
            [0.4357, 0.8886, 0.6678, 1.0311],
            [0.4429, 0.9006, 0.6775, 1.0460],
            [0.3860, 0.8021, 0.5985, 0.9250],
        ]
    )
    torch.testing.assert_close(out, printed, atol=6e-5, rtol=0)


# --- errors --------------------------------------------------------------------------------------


def test_query_embedding_size_error_names_d_in():
    cross = CrossAttention(3, 2, 4, d_context=5)
    with pytest.raises(ValueError, match=r"x has embedding size 4 .*d_in=3: create it with d_in=4"):
        cross(torch.rand(6, 4), torch.rand(8, 5))


def test_context_embedding_size_error_names_d_context():
    cross = CrossAttention(3, 2, 4)  # d_context defaults to d_in = 3
    with pytest.raises(ValueError, match=r"context has embedding size 16 .*d_context=3: create it with d_context=16"):
        cross(torch.rand(6, 3), torch.rand(8, 16))


@pytest.mark.parametrize(
    "x_shape, context_shape, match",
    [
        ((2, 6, 3), (8, 3), "both with a batch axis"),
        ((2, 6, 3), (3, 8, 3), "x holds 2 sequences but context holds 3"),
        ((3,), (8, 3), r"x must have shape \(T_q, 3\) or \(B, T_q, 3\)"),
    ],
)
def test_shape_errors(x_shape, context_shape, match):
    with pytest.raises(ValueError, match=match):
        CrossAttention(3, 2, 4)(torch.rand(x_shape), torch.rand(context_shape))


def test_mask_errors():
    cross = CrossAttention(3, 2, 4)
    x, context = torch.rand(2, 6, 3), torch.rand(2, 8, 3)
    with pytest.raises(TypeError, match="bool tensor"):
        cross(x, context, key_padding_mask=torch.zeros(2, 8))
    with pytest.raises(ValueError, match=r"one entry per context token, shape \(2, 8\)"):
        cross(x, context, key_padding_mask=torch.zeros(2, 6, dtype=torch.bool))


@pytest.mark.parametrize("bad", [0, -2, 2.5, True, "3"])
def test_constructor_rejects_bad_sizes(bad):
    with pytest.raises((ValueError, TypeError), match="d_context"):
        CrossAttention(3, 2, 4, d_context=bad)


def test_non_tensor_input():
    with pytest.raises(TypeError, match="context must be a torch.Tensor"):
        CrossAttention(3, 2, 4)(torch.rand(6, 3), [[0.0, 1.0, 2.0]])
