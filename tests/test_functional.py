"""The attention core (attention_book.functional): masked_softmax and scaled_dot_product_attention.

Hypothesis draws the shapes; with CI=true every run draws the same examples (derandomize), so a
CI failure reproduces locally with CI=true.
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from helpers import in_ci
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from attention_book.functional import (
    masked_softmax,
    scale_scores,
    scaled_dot_product_attention,
)
from attention_book.masks import causal_mask, combine_masks, padding_mask

CORE = settings(max_examples=40, deadline=None, derandomize=in_ci())
FLOAT_DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16]


def _randn(seed, *shape, dtype=torch.float32):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)).to(dtype)


def _rand_mask(seed, *shape, p=0.5):
    return torch.rand(*shape, generator=torch.Generator().manual_seed(seed)) < p


# ----------------------------------------------------------------- masked_softmax
@CORE
@given(seed=st.integers(0, 10_000), shape=st.lists(st.integers(1, 5), min_size=1, max_size=4),
       spread=st.floats(0.01, 50.0))
def test_without_a_mask_it_is_torch_softmax(seed, shape, spread):
    scores = _randn(seed, *shape) * spread
    for dim in range(-len(shape), len(shape)):
        assert torch.equal(masked_softmax(scores, dim=dim), torch.softmax(scores, dim=dim))


@CORE
@given(seed=st.integers(0, 10_000), batch=st.integers(1, 3), rows=st.integers(1, 6), cols=st.integers(1, 6))
def test_hidden_entries_get_zero_and_visible_ones_the_softmax_over_the_visible(seed, batch, rows, cols):
    scores = _randn(seed, batch, rows, cols) * 3
    mask = _rand_mask(seed + 1, batch, rows, cols)
    weights = masked_softmax(scores, mask)
    assert torch.all(weights[mask] == 0)
    for b in range(batch):
        for r in range(rows):
            visible = ~mask[b, r]
            if visible.any():  # the softmax of the visible scores alone, written independently
                expected = torch.exp(scores[b, r, visible]) / torch.exp(scores[b, r, visible]).sum()
                assert torch.allclose(weights[b, r, visible], expected, atol=1e-6)
                assert math.isclose(float(weights[b, r].sum()), 1.0, abs_tol=1e-5)
            else:
                assert torch.all(weights[b, r] == 0)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("magnitude", [1.0, 1e4, 6e4])
def test_fully_masked_row_is_zero_with_zero_finite_gradient(dtype, magnitude):
    # 6e4 is close to the fp16 maximum (65504): large, -inf-free scores
    scores = (_randn(0, 2, 3, 4).clamp(-1, 1) * magnitude).to(dtype).requires_grad_()
    assert torch.isfinite(scores).all()
    mask = torch.tensor([[True, True, True, True],  # row 0: nothing visible
                         [False, True, False, True],
                         [False, False, False, False]])
    weights = masked_softmax(scores, mask)
    assert weights.dtype == dtype
    assert not torch.isnan(weights).any()
    assert torch.all(weights[:, 0] == 0)
    assert torch.allclose(weights[:, 1:].float().sum(-1), torch.ones(2, 2), atol=1e-2)
    (weights.float() * _randn(1, 2, 3, 4)).sum().backward()
    assert torch.isfinite(scores.grad).all()
    assert torch.all(scores.grad[:, 0] == 0)  # no gradient through a row that attends to nothing
    assert torch.all(scores.grad[:, 1][mask[1].expand(2, 4)] == 0)  # nor through hidden entries
    if magnitude == 1.0:  # (large scores saturate the softmax: one-hot rows, zero gradient)
        assert scores.grad[:, 1:].abs().sum() > 0  # ...but through the visible ones


def test_fully_masked_row_where_plain_softmax_gives_nan():
    """The situation the rule exists for: causal mask plus left padding (chapter 7)."""
    scores = _randn(3, 3, 3).requires_grad_()
    hide = causal_mask(3) | torch.tensor([True, False, False])  # row 0 hides every key
    plain = torch.softmax(scores.masked_fill(hide, float("-inf")), dim=-1)
    assert torch.isnan(plain[0]).all()  # what the core prevents
    weights = masked_softmax(scores, hide)
    assert torch.equal(weights[0], torch.zeros(3))
    assert torch.allclose(weights[1:], plain[1:])
    weights.sum().backward()
    assert torch.isfinite(scores.grad).all()


@CORE
@given(seed=st.integers(0, 10_000), rows=st.integers(1, 5), cols=st.integers(1, 5))
def test_mask_along_another_dim(seed, rows, cols):
    scores = _randn(seed, rows, cols)
    mask = _rand_mask(seed + 7, rows, cols)
    assert torch.allclose(masked_softmax(scores, mask, dim=0), masked_softmax(scores.T, mask.T).T)


def test_mask_broadcasts_and_keeps_the_scores_device_and_shape():
    scores = _randn(0, 2, 4, 4)
    weights = masked_softmax(scores, causal_mask(4))  # (4, 4) broadcasts over the batch
    assert weights.shape == (2, 4, 4)
    assert torch.all(weights.triu(1) == 0)


def test_scores_are_not_modified_in_place():
    scores = _randn(0, 3, 3)
    original = scores.clone()
    masked_softmax(scores, causal_mask(3) | torch.tensor([True, False, False]))
    assert torch.equal(scores, original)


@pytest.mark.parametrize(
    "kwargs, error, words",
    [
        (dict(scores=[[1.0, 2.0]]), TypeError, "scores"),
        (dict(scores=torch.tensor([1, 2])), TypeError, "scores"),
        (dict(scores=torch.tensor(1.0)), ValueError, "scores"),
        (dict(scores=torch.zeros(2, 3), dim=2), ValueError, "dim"),
        (dict(scores=torch.zeros(2, 3), dim=1.0), TypeError, "dim"),
        (dict(scores=torch.zeros(2, 3), mask=torch.ones(2, 3)), TypeError, "mask"),
        (dict(scores=torch.zeros(2, 3), mask=[[True, False, True]]), TypeError, "mask"),
        (dict(scores=torch.zeros(2, 3), mask=torch.ones(3, 3, dtype=torch.bool)), ValueError, "mask"),
        (dict(scores=torch.zeros(2, 3), mask=torch.ones(4, 2, 3, dtype=torch.bool)), ValueError, "mask"),
    ],
)
def test_masked_softmax_bad_inputs(kwargs, error, words):
    with pytest.raises(error, match=words):
        masked_softmax(**kwargs)


# ----------------------------------------------------------------- scaled_dot_product_attention
@st.composite
def attention_inputs(draw, dtype=torch.float32):
    """query (B, H, T_q, d_k), key (B, H, T_k, d_k), value (B, H, T_k, d_v) and a bool mask."""
    seed = draw(st.integers(0, 2**16))
    batch, heads = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    t_q, t_k = draw(st.integers(1, 6)), draw(st.integers(1, 6))
    d_k, d_v = draw(st.integers(1, 8)), draw(st.integers(1, 8))
    mask_shape = draw(st.sampled_from([(batch, heads, t_q, t_k), (batch, 1, t_q, t_k), (t_q, t_k),
                                       (batch, 1, 1, t_k)]))
    hide_probability = draw(st.sampled_from([0.0, 0.3, 0.7, 1.0]))
    query = _randn(seed, batch, heads, t_q, d_k, dtype=dtype)
    key = _randn(seed + 1, batch, heads, t_k, d_k, dtype=dtype)
    value = _randn(seed + 2, batch, heads, t_k, d_v, dtype=dtype)
    mask = _rand_mask(seed + 3, *mask_shape, p=hide_probability)
    return query, key, value, mask


@CORE
@given(inputs=attention_inputs())
def test_equals_torch_sdpa_with_the_mask_convention_converted(inputs):
    query, key, value, mask = inputs
    context, weights = scaled_dot_product_attention(query, key, value)
    assert torch.allclose(context, F.scaled_dot_product_attention(query, key, value), atol=1e-5)
    assert weights.shape == query.shape[:-1] + (key.shape[-2],)

    context, weights = scaled_dot_product_attention(query, key, value, mask=mask)
    # PyTorch's boolean attn_mask is True = "may attend": the opposite of the book's mask.
    reference = F.scaled_dot_product_attention(query, key, value, attn_mask=~mask)
    has_a_key = ~mask.all(dim=-1).expand(query.shape[:-1])  # (B, H, T_q)
    # Rows with at least one visible key must agree; for a fully masked row PyTorch's result
    # depends on the backend (NaN on some), the book's rule gives zeros.
    assert torch.allclose(context[has_a_key], reference[has_a_key], atol=1e-5)
    assert torch.all(context[~has_a_key] == 0)
    assert not torch.isnan(weights).any()


@CORE
@given(inputs=attention_inputs(), scale=st.floats(0.01, 4.0))
def test_explicit_scale_equals_torch_sdpa_scale(inputs, scale):
    query, key, value, _ = inputs
    context, _ = scaled_dot_product_attention(query, key, value, scale=scale)
    assert torch.allclose(context, F.scaled_dot_product_attention(query, key, value, scale=scale), atol=1e-5)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_low_precision_never_nan(dtype):
    query = (_randn(0, 2, 2, 5, 4, dtype=dtype) * 100).requires_grad_()  # large scores
    key = _randn(1, 2, 2, 5, 4, dtype=dtype) * 100
    value = _randn(2, 2, 2, 5, 3, dtype=dtype)
    mask = causal_mask(5) | torch.tensor([True, True, False, False, False])  # rows 0, 1: nothing visible
    context, weights = scaled_dot_product_attention(query, key, value, mask=mask)
    assert context.dtype == dtype and weights.dtype == dtype
    assert not torch.isnan(context).any() and not torch.isnan(weights).any()
    assert torch.all(context[:, :, :2] == 0)
    context.float().sum().backward()
    assert torch.isfinite(query.grad).all()


def test_dropout_is_applied_to_the_weights():
    query, key, value = _randn(0, 1, 6, 4), _randn(1, 1, 6, 4), _randn(2, 1, 6, 3)
    dropout = nn.Dropout(0.5).train()
    torch.manual_seed(0)
    context, weights = scaled_dot_product_attention(query, key, value, dropout=dropout)
    _, clean = scaled_dot_product_attention(query, key, value)
    assert (weights == 0).any()  # some weights dropped ...
    kept = weights != 0
    assert torch.allclose(weights[kept], clean[kept] * 2)  # ... the rest scaled by 1 / (1 - p)
    assert torch.allclose(context, weights @ value)
    dropout.eval()
    assert torch.equal(scaled_dot_product_attention(query, key, value, dropout=dropout)[1], clean)


def test_default_scale_is_one_over_sqrt_dk():
    query, key, value = _randn(0, 3, 9), _randn(1, 4, 9), _randn(2, 4, 2)
    _, weights = scaled_dot_product_attention(query, key, value)
    assert torch.allclose(weights, torch.softmax(query @ key.T / 3.0, dim=-1))


def test_batch_dimensions_broadcast():
    query = _randn(0, 2, 3, 5, 4)
    key, value = _randn(1, 1, 1, 6, 4), _randn(2, 1, 1, 6, 2)  # one shared context
    context, weights = scaled_dot_product_attention(query, key, value)
    assert context.shape == (2, 3, 5, 2) and weights.shape == (2, 3, 5, 6)


Q, K, V = torch.zeros(2, 3, 4), torch.zeros(2, 5, 4), torch.zeros(2, 5, 6)


@pytest.mark.parametrize(
    "kwargs, error, words",
    [
        (dict(query=Q.tolist()), TypeError, "query"),
        (dict(key=K.long()), TypeError, "key"),
        (dict(value=V.double()), TypeError, "value"),
        (dict(key=K.to("meta")), ValueError, "key"),
        (dict(query=torch.zeros(4)), ValueError, "query"),
        (dict(key=torch.zeros(2, 5, 3)), ValueError, "key"),
        (dict(value=torch.zeros(2, 4, 6)), ValueError, "value"),
        (dict(value=torch.zeros(3, 5, 6)), ValueError, "value"),
        (dict(mask=torch.zeros(3, 5)), TypeError, "mask"),
        (dict(mask=torch.zeros(5, 3, dtype=torch.bool)), ValueError, "mask"),
        (dict(dropout=0.1), TypeError, "dropout"),
        (dict(scale=0.0), ValueError, "scale"),
        (dict(scale="0.5"), TypeError, "scale"),
    ],
)
def test_sdpa_bad_inputs(kwargs, error, words):
    arguments = dict(query=Q, key=K, value=V)
    arguments.update(kwargs)
    with pytest.raises(error, match=words):
        scaled_dot_product_attention(**arguments)


def test_scale_scores_is_the_books_one_over_sqrt_dk():
    scores = _randn(0, 3, 4)
    assert torch.equal(scale_scores(scores, d_k=16), scores / 4.0)
    assert torch.equal(scale_scores(scores, d_k=16, scale=0.5), scores * 0.5)
    with pytest.raises(ValueError, match="d_k"):
        scale_scores(scores, d_k=0)
    with pytest.raises(TypeError, match="scale"):
        scale_scores(scores, d_k=4, scale="2")


# ----------------------------------------------------------------- mask helpers (attention_book.masks)
def test_padding_mask_spreads_over_the_query_axes():
    key_padding_mask = torch.tensor([[False, True, True], [False, False, False]])  # (B, T_k)
    assert padding_mask(key_padding_mask).shape == (2, 1, 3)
    assert padding_mask(key_padding_mask, num_query_dims=2).shape == (2, 1, 1, 3)
    scores = _randn(0, 2, 4, 3)
    weights = masked_softmax(scores, padding_mask(key_padding_mask))
    assert torch.all(weights[0, :, 1:] == 0) and torch.allclose(weights.sum(-1), torch.ones(2, 4))


def test_combine_masks_hides_what_any_mask_hides():
    padding = padding_mask(torch.tensor([[True, False, False]]))  # (1, 1, 3)
    combined = combine_masks(causal_mask(3), None, padding)
    assert combined.tolist() == [[[True, True, True], [True, False, True], [True, False, False]]]
    assert combine_masks(None, None) is None
    assert combine_masks(causal_mask(2)) is not None
