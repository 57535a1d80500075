"""Chapter 7 package code: CausalAttention, renormalise_masked, masked_softmax."""

import math

import pytest
import torch
from helpers import in_ci
from hypothesis import given, settings
from hypothesis import strategies as st

from attention_book import functional
from attention_book.causal import CausalAttention, masked_softmax, renormalise_masked
from attention_book.data import journey_inputs
from attention_book.masks import causal_mask

SETTINGS = settings(max_examples=40, deadline=None, derandomize=in_ci())  # same examples in CI


def _randn(seed, *shape):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


# ----------------------------------------------------------------- no information from the future
@SETTINGS
@given(
    seed=st.integers(0, 10_000),
    batch=st.integers(1, 3),
    num_tokens=st.integers(2, 8),
    d_in=st.integers(1, 5),
    d_out=st.integers(1, 5),
    data=st.data(),
)
def test_causal_attention_output_ignores_later_tokens(seed, batch, num_tokens, d_in, d_out, data):
    torch.manual_seed(seed)
    attention = CausalAttention(d_in, d_out, context_length=8, dropout=0.0).eval()
    x = _randn(seed, batch, num_tokens, d_in)
    t = data.draw(st.integers(0, num_tokens - 2), label="t")
    changed = x.clone()
    changed[:, t + 1:] = _randn(seed + 1, batch, num_tokens - t - 1, d_in) * 5  # rewrite the future
    before, after = attention(x), attention(changed)
    assert torch.allclose(before[:, : t + 1], after[:, : t + 1], atol=1e-6)
    # ...and the test can fail: the outputs after t do see the change
    assert not torch.allclose(before[:, t + 1:], after[:, t + 1:], atol=1e-6)


@SETTINGS
@given(seed=st.integers(0, 10_000), num_tokens=st.integers(2, 7), num_heads=st.sampled_from([1, 2, 3]))
def test_multihead_causal_output_ignores_later_tokens(seed, num_tokens, num_heads):
    multihead = pytest.importorskip("attention_book.multihead")
    torch.manual_seed(seed)
    d_out = 2 * num_heads
    attention = multihead.MultiHeadAttention(
        4, d_out, context_length=8, dropout=0.0, num_heads=num_heads, causal=True
    ).eval()
    x = _randn(seed, 2, num_tokens, 4)
    changed = x.clone()
    changed[:, -1] = changed[:, -1] + 3.0  # change only the last token
    before, after = attention(x), attention(changed)
    assert torch.allclose(before[:, :-1], after[:, :-1], atol=1e-6)
    assert not torch.allclose(before[:, -1], after[:, -1], atol=1e-6)


def test_multihead_without_causal_mask_does_leak():
    multihead = pytest.importorskip("attention_book.multihead")
    torch.manual_seed(0)
    attention = multihead.MultiHeadAttention(4, 4, 6, 0.0, num_heads=2, causal=False).eval()
    x = _randn(1, 1, 6, 4)
    changed = x.clone()
    changed[:, -1] += 3.0
    assert not torch.allclose(attention(x)[:, 0], attention(changed)[:, 0], atol=1e-6)


# ----------------------------------------------------------------- two ways to mask, same weights
@SETTINGS
@given(seed=st.integers(0, 10_000), batch=st.integers(1, 3), num_tokens=st.integers(1, 9),
       scale=st.floats(0.1, 10.0))
def test_renormalising_after_softmax_equals_neg_inf_before(seed, batch, num_tokens, scale):
    scores = _randn(seed, batch, num_tokens, num_tokens) * scale
    hide = causal_mask(num_tokens)
    way_1 = renormalise_masked(torch.softmax(scores, dim=-1), hide)
    way_2 = masked_softmax(scores, hide)
    assert torch.allclose(way_1, way_2, atol=1e-5)
    assert torch.allclose(way_2.sum(-1), torch.ones(batch, num_tokens), atol=1e-5)
    assert torch.all(way_2[..., hide] == 0)


def test_masked_softmax_is_the_core():
    assert masked_softmax is functional.masked_softmax


def test_all_hidden_row_is_zero_in_both_recipes_where_plain_softmax_gives_nan():
    scores = _randn(0, 3, 3).requires_grad_()
    hide = torch.zeros(3, 3, dtype=torch.bool)
    hide[1] = True
    plain = torch.softmax(scores.masked_fill(hide, float("-inf")), dim=-1)
    assert torch.isnan(plain[1]).all()  # what the core's rule prevents
    way_2 = masked_softmax(scores, hide)
    way_1 = renormalise_masked(torch.softmax(scores, -1), hide)
    assert torch.equal(way_2[1], torch.zeros(3)) and torch.equal(way_1[1], torch.zeros(3))
    assert torch.allclose(way_1, way_2, atol=1e-6)
    assert torch.allclose(way_2[0], torch.softmax(scores[0], -1))
    (way_1.sum() + way_2.sum()).backward()
    assert torch.isfinite(scores.grad).all()


@SETTINGS
@given(seed=st.integers(0, 10_000), rows=st.integers(1, 6), cols=st.integers(1, 6))
def test_renormalise_masked_equals_the_core_for_any_mask(seed, rows, cols):
    """renormalise_masked is written out to teach; the core is the reference (random masks, all-
    hidden rows included)."""
    scores = _randn(seed, 2, rows, cols) * 3
    hide = torch.rand(2, rows, cols, generator=torch.Generator().manual_seed(seed + 1)) < 0.6
    expected = functional.masked_softmax(scores, hide)
    assert torch.allclose(renormalise_masked(torch.softmax(scores, -1), hide), expected, atol=1e-5)


def test_mask_helpers_reject_bad_masks():
    scores = torch.zeros(4, 4)
    with pytest.raises(TypeError, match="mask == 0"):
        masked_softmax(scores, torch.tril(torch.ones(4, 4)))
    with pytest.raises(ValueError, match=r"mask\[:T, :T\]"):
        renormalise_masked(scores, causal_mask(6))


# ----------------------------------------------------------------- dropout
@SETTINGS
@given(seed=st.integers(0, 10_000), p=st.sampled_from([0.1, 0.25, 0.5, 0.8]), num_tokens=st.integers(2, 8))
def test_dropout_identity_in_eval_and_rescaled_in_train(seed, p, num_tokens):
    torch.manual_seed(seed)
    attention = CausalAttention(3, 4, context_length=8, dropout=p)
    x = _randn(seed, 2, num_tokens, 3)

    attention.eval()
    _, eval_weights = attention(x, return_weights=True)
    plain = CausalAttention(3, 4, context_length=8, dropout=0.0)
    plain.load_state_dict(attention.state_dict())
    _, clean_weights = plain(x, return_weights=True)
    assert torch.equal(eval_weights, clean_weights)  # eval: dropout does nothing
    assert torch.allclose(eval_weights.sum(-1), torch.ones(2, num_tokens), atol=1e-5)

    attention.train()
    _, train_weights = attention(x, return_weights=True)
    kept = train_weights != 0
    # every surviving weight is the clean weight times 1 / (1 - p); the rest are exactly 0
    assert torch.allclose(train_weights[kept], clean_weights[kept] / (1 - p), atol=1e-5)
    assert torch.all(train_weights[~kept] == 0)


def test_dropout_keeps_the_expected_weight():
    torch.manual_seed(0)
    weights = torch.softmax(_randn(0, 4, 4), dim=-1)
    dropout = torch.nn.Dropout(0.5)
    mean = torch.stack([dropout(weights) for _ in range(4000)]).mean(0)
    assert torch.allclose(mean, weights, atol=0.03)
    assert not torch.allclose(dropout(weights).sum(-1), torch.ones(4))


# ----------------------------------------------------------------- the module
def test_reproduces_source_001_numbers():
    _, inputs = journey_inputs()
    batch = torch.stack((inputs, inputs), dim=0)  # (2, 6, 3)
    torch.manual_seed(123)
    attention = CausalAttention(3, 2, context_length=6, dropout=0.0)
    context = attention(batch)
    expected_rows = torch.tensor([[-0.4519, 0.2216], [-0.5874, 0.0058], [-0.6300, -0.0632],
                                  [-0.5675, -0.0843], [-0.5526, -0.0981], [-0.5299, -0.1081]])
    assert context.shape == (2, 6, 2)
    assert torch.allclose(context[0], expected_rows, atol=1e-4)
    assert torch.allclose(context[1], expected_rows, atol=1e-4)


def test_shorter_inputs_use_a_slice_of_the_mask():
    torch.manual_seed(1)
    attention = CausalAttention(3, 2, context_length=10).eval()
    x = _randn(2, 1, 4, 3)
    _, weights = attention(x, return_weights=True)
    assert weights.shape == (1, 4, 4)
    assert torch.all(weights[0][causal_mask(4)] == 0)
    # the first token can only look at itself
    assert torch.allclose(weights[0, 0], torch.tensor([1.0, 0, 0, 0]))


def test_manual_computation_matches_module():
    torch.manual_seed(3)
    attention = CausalAttention(3, 5, context_length=6, qkv_bias=True).eval()
    x = _randn(4, 2, 6, 3)
    q, k, v = attention.W_query(x), attention.W_key(x), attention.W_value(x)
    scores = q @ k.transpose(1, 2) / math.sqrt(5)
    scores = scores.masked_fill(torch.triu(torch.ones(6, 6), diagonal=1).bool(), float("-inf"))
    assert torch.allclose(attention(x), torch.softmax(scores, -1) @ v, atol=1e-6)


def test_too_long_input_says_how_to_fix():
    attention = CausalAttention(3, 2, context_length=4)
    with pytest.raises(ValueError, match=r"context_length=4.*truncate.*context_length >= 6"):
        attention(torch.zeros(1, 6, 3))


@pytest.mark.parametrize(
    "x, message",
    [
        (torch.zeros(6, 3), r"x.unsqueeze\(0\)"),
        (torch.zeros(1, 6, 5), r"d_in=5"),
    ],
)
def test_bad_input_shapes(x, message):
    with pytest.raises(ValueError, match=message):
        CausalAttention(3, 2, context_length=6)(x)


def test_non_tensor_input():
    with pytest.raises(TypeError, match="x must be a torch.Tensor of shape"):
        CausalAttention(3, 2, context_length=6)([[0.0, 0.0, 0.0]])


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        (dict(d_in=0, d_out=2, context_length=4), ValueError, "d_in must be a positive int"),
        (dict(d_in=3, d_out=2, context_length=0), ValueError, "context_length must be a positive int"),
        (dict(d_in=3, d_out=2, context_length=4, dropout=1.0), ValueError, r"dropout must be a probability in \[0, 1\)"),
        (dict(d_in=3, d_out=2.5, context_length=4), TypeError, "d_out must be a positive int"),
        (dict(d_in=3.0, d_out=2, context_length=4), TypeError, "d_in must be a positive int"),
        (dict(d_in=3, d_out=2, context_length=4, dropout="0.1"), TypeError, "dropout must be a probability"),
    ],
)
def test_bad_constructor_arguments(kwargs, error, message):
    with pytest.raises(error, match=message):
        CausalAttention(**kwargs)


def test_mask_is_a_non_persistent_buffer_that_follows_the_module():
    attention = CausalAttention(3, 2, context_length=5)
    assert "mask" in dict(attention.named_buffers())
    assert "mask" not in attention.state_dict()  # rebuilt from context_length, not saved
    assert attention.mask.dtype == torch.bool and attention.mask.shape == (5, 5)
    moved = attention.to("meta")  # moves parameters and buffers without any GPU
    assert moved.mask.device.type == "meta"
    assert moved.W_query.weight.device.type == "meta"


def test_state_dict_round_trip_gives_same_outputs():
    torch.manual_seed(5)
    original = CausalAttention(3, 4, context_length=6).eval()
    torch.manual_seed(6)
    copy = CausalAttention(3, 4, context_length=6).eval()
    x = _randn(7, 2, 6, 3)
    assert not torch.allclose(original(x), copy(x))
    copy.load_state_dict(original.state_dict())
    assert torch.equal(original(x), copy(x))


def test_gradients_flow_only_from_the_past():
    torch.manual_seed(2)
    attention = CausalAttention(3, 2, context_length=5).eval()
    x = _randn(8, 1, 5, 3).requires_grad_(True)
    attention(x)[0, 1].sum().backward()  # output at position 1
    assert torch.all(x.grad[0, 2:] == 0)  # positions 2, 3, 4 did not contribute
    assert torch.any(x.grad[0, :2] != 0)
