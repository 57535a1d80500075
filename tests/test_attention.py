"""Unit tests of attention_book.attention (chapter 4): SelfAttention, SelfAttentionParams, copy_weights."""

import pytest
import torch
import torch.nn.functional as F
from helpers import in_ci
from hypothesis import given, settings
from hypothesis import strategies as st

from attention_book.attention import (
    SelfAttention,
    SelfAttentionParams,
    copy_weights,
    scaled_dot_product,
)
from attention_book.data import journey_inputs, life_inputs

sizes = st.integers(min_value=1, max_value=8)


def sdpa_reference(module, x):
    """torch's fused scaled_dot_product_attention fed with the module's own projections."""
    queries, keys, values = module.project(x)
    return F.scaled_dot_product_attention(queries, keys, values)


@settings(max_examples=40, deadline=None, derandomize=in_ci())
@given(
    batch=st.one_of(st.none(), st.integers(1, 3)),
    tokens=sizes,
    d_in=sizes,
    d_out_kq=sizes,
    d_out_v=st.one_of(st.none(), sizes),
    bias=st.booleans(),
    seed=st.integers(0, 2**16),
    linear=st.booleans(),
)
def test_matches_torch_sdpa(batch, tokens, d_in, d_out_kq, d_out_v, bias, seed, linear):
    torch.manual_seed(seed)
    cls = SelfAttention if linear else SelfAttentionParams
    module = cls(d_in, d_out_kq, d_out_v, qkv_bias=bias).double()
    if bias and not linear:  # the nn.Parameter biases start at zero: make them matter
        with torch.no_grad():
            for name in ("query", "key", "value"):
                getattr(module, f"b_{name}").normal_()
    shape = (tokens, d_in) if batch is None else (batch, tokens, d_in)
    x = torch.randn(*shape, dtype=torch.float64)
    context, weights = module(x, return_weights=True)
    d_v = d_out_kq if d_out_v is None else d_out_v
    assert context.shape == (*shape[:-1], d_v)
    assert weights.shape == (*shape[:-1], tokens)
    assert torch.allclose(context, sdpa_reference(module, x), atol=1e-6, rtol=0)
    assert torch.allclose(weights.sum(dim=-1), torch.ones(shape[:-1], dtype=torch.float64), atol=1e-6)
    assert torch.equal(module(x), context)  # return_weights only adds the weights


@settings(max_examples=30, deadline=None, derandomize=in_ci())
@given(batch=st.integers(1, 3), tokens=sizes, d_in=sizes, d_out_kq=sizes, d_out_v=sizes, seed=st.integers(0, 2**16))
def test_batch_equals_each_sequence_alone(batch, tokens, d_in, d_out_kq, d_out_v, seed):
    torch.manual_seed(seed)
    module = SelfAttention(d_in, d_out_kq, d_out_v)
    x = torch.randn(batch, tokens, d_in)
    together = module(x)
    for b in range(batch):
        assert torch.allclose(together[b], module(x[b]), atol=1e-6)


@settings(max_examples=40, deadline=None, derandomize=in_ci())
@given(
    d_in=sizes,
    d_out_kq=sizes,
    d_out_v=sizes,
    bias=st.booleans(),
    seed=st.integers(0, 2**16),
    params_first=st.booleans(),
)
def test_params_and_linear_agree_after_copy(d_in, d_out_kq, d_out_v, bias, seed, params_first):
    torch.manual_seed(seed)
    params = SelfAttentionParams(d_in, d_out_kq, d_out_v, qkv_bias=bias).double()
    linear = SelfAttention(d_in, d_out_kq, d_out_v, qkv_bias=bias).double()
    if bias:
        with torch.no_grad():
            for name in ("query", "key", "value"):
                getattr(params, f"b_{name}").normal_()
    x = torch.randn(2, 5, d_in, dtype=torch.float64)
    src, dst = (params, linear) if params_first else (linear, params)
    assert not torch.allclose(src(x), dst(x), atol=1e-6)  # independent random weights before the copy
    assert copy_weights(src, dst) is dst
    assert torch.allclose(src(x), dst(x), atol=1e-6, rtol=0)
    for name in ("query", "key", "value"):
        matrix = getattr(params, f"W_{name}")
        assert torch.equal(getattr(linear, f"W_{name}").weight, matrix.T)  # (d_out, d_in) layout
        assert isinstance(matrix, torch.nn.Parameter) and isinstance(getattr(linear, f"W_{name}").weight, torch.nn.Parameter)


def test_copy_keeps_modules_independent():
    torch.manual_seed(0)
    params, linear = SelfAttentionParams(3, 2, 4), SelfAttention(3, 2, 4)
    copy_weights(params, linear)
    before = linear.W_value.weight.detach().clone()
    with torch.no_grad():
        params.W_value.mul_(2.0)
    assert torch.equal(linear.W_value.weight, before)


def test_copy_without_bias_into_module_with_bias_zeroes_it():
    torch.manual_seed(0)
    params, linear = SelfAttentionParams(3, 2), SelfAttention(3, 2, qkv_bias=True)
    copy_weights(params, linear)
    assert torch.equal(linear.W_key.bias, torch.zeros(2))
    x = torch.randn(4, 3)
    assert torch.allclose(params(x), linear(x), atol=1e-6)


def test_seeded_params_version_reproduces_source_001():
    _, inputs = journey_inputs()
    torch.manual_seed(123)
    module = SelfAttentionParams(d_in=3, d_out_kq=2)
    expected = torch.tensor(
        [[0.2845, 0.4071], [0.2854, 0.4081], [0.2854, 0.4075], [0.2864, 0.3974], [0.2863, 0.3910], [0.2860, 0.4039]]
    )
    assert torch.allclose(module(inputs), expected, atol=1e-4)


def test_seeded_linear_version_with_bias_reproduces_source_001():
    _, inputs = journey_inputs()
    torch.manual_seed(123)
    module = SelfAttention(d_in=3, d_out_kq=2, qkv_bias=True)  # the source kept nn.Linear's default bias
    expected = torch.tensor(
        [[0.1059, 0.9296], [0.1144, 0.9353], [0.1143, 0.9353], [0.1181, 0.9369], [0.1138, 0.9343], [0.1188, 0.9375]]
    )
    assert torch.allclose(module(inputs), expected, atol=1e-4)


def test_life_example_with_d_v_4_reproduces_source_000():
    _, _, embeddings = life_inputs()
    torch.manual_seed(123)  # the source draws its matrices with torch.rand
    W_query, W_key, W_value = torch.rand(3, 2), torch.rand(3, 2), torch.rand(3, 4)
    module = SelfAttentionParams(3, 2, 4)
    module.load_state_dict({"W_query": W_query, "W_key": W_key, "W_value": W_value})
    context = module(embeddings)
    assert context.shape == (6, 4)
    assert torch.allclose(context[1], torch.tensor([0.5313, 1.3607, 0.7891, 1.3110]), atol=1e-4)
    assert torch.allclose(context[0], torch.tensor([-0.1564, 0.1028, -0.0763, -0.0764]), atol=1e-4)


def test_scale_uses_keys_width_not_values_width():
    torch.manual_seed(0)
    queries, keys, values = torch.randn(4, 3), torch.randn(4, 3), torch.randn(4, 7)
    context, weights = scaled_dot_product(queries, keys, values)
    assert torch.allclose(weights, torch.softmax(queries @ keys.T / 3**0.5, dim=-1))
    assert not torch.allclose(weights, torch.softmax(queries @ keys.T / 7**0.5, dim=-1))
    assert torch.allclose(context, weights @ values)


def test_default_has_no_bias_and_d_v_defaults_to_d_k():
    module = SelfAttention(5, 3)
    assert module.W_query.bias is None and module.W_value.out_features == 3
    assert module.W_query.weight.shape == (3, 5)  # nn.Linear layout (d_out, d_in)
    assert SelfAttentionParams(5, 3).W_value.shape == (5, 3)  # row-vector layout (d_in, d_out)
    assert "d_out_v=3" in repr(module)


def test_gradients_reach_all_three_projections():
    torch.manual_seed(0)
    module = SelfAttention(3, 2, 4)
    module(torch.randn(2, 5, 3)).sum().backward()
    for linear in (module.W_query, module.W_key, module.W_value):
        assert linear.weight.grad is not None and linear.weight.grad.abs().sum() > 0


# --- error messages ---------------------------------------------------------------------------------


@pytest.mark.parametrize("cls", [SelfAttention, SelfAttentionParams])
def test_wrong_last_dimension_says_how_to_fix(cls):
    module = cls(3, 2)
    with pytest.raises(ValueError, match=r"x has 4 features in its last dimension .* built with d_in=3") as info:
        module(torch.zeros(6, 4))
    assert "d_in=4" in str(info.value)  # suggests building a matching module


@pytest.mark.parametrize("cls", [SelfAttention, SelfAttentionParams])
def test_one_dimensional_input_suggests_unsqueeze(cls):
    with pytest.raises(ValueError, match=r"unsqueeze\(0\)"):
        cls(3, 2)(torch.zeros(3))


def test_four_dimensional_input_is_rejected():
    with pytest.raises(ValueError, match=r"\(T, 3\) or \(B, T, 3\).*4-D"):
        SelfAttention(3, 2)(torch.zeros(1, 2, 6, 3))


def test_non_tensor_input_is_a_type_error():
    with pytest.raises(TypeError, match="torch.tensor"):
        SelfAttention(3, 2)([[0.0, 1.0, 2.0]])


@pytest.mark.parametrize(
    "kwargs, error, pattern",
    [
        ({"d_in": 0, "d_out_kq": 2}, ValueError, "d_in must be a positive int, got 0"),
        ({"d_in": 3, "d_out_kq": 2.0}, TypeError, "d_out_kq must be a positive int"),
        ({"d_in": 3, "d_out_kq": 2, "d_out_v": -1}, ValueError, "d_out_v must be a positive int"),
        ({"d_in": 3, "d_out_kq": 2, "qkv_bias": 1}, TypeError, "qkv_bias must be True or False"),
    ],
)
def test_bad_constructor_arguments(kwargs, error, pattern):
    with pytest.raises(error, match=pattern):
        SelfAttention(**kwargs)


def test_copy_between_different_sizes_names_both():
    with pytest.raises(ValueError, match=r"W_value of src maps 3 -> 4 features but W_value of dst maps 3 -> 2"):
        copy_weights(SelfAttentionParams(3, 2, 4), SelfAttention(3, 2))


def test_copy_refuses_to_drop_a_nonzero_bias():
    torch.manual_seed(0)
    with pytest.raises(ValueError, match="qkv_bias=True"):
        copy_weights(SelfAttention(3, 2, qkv_bias=True), SelfAttentionParams(3, 2))


def test_copy_rejects_other_modules():
    with pytest.raises(TypeError, match="W_query, W_key and W_value"):
        copy_weights(torch.nn.Linear(3, 2), SelfAttention(3, 2))


def test_mismatched_query_and_key_sizes():
    with pytest.raises(ValueError, match="the same d_k"):
        scaled_dot_product(torch.zeros(4, 3), torch.zeros(4, 2), torch.zeros(4, 5))


def test_copy_works_for_any_module_with_the_three_projections():
    """The chapter's own SelfAttentionV1-style classes: plain (d_in, d_out) parameters."""

    class Handwritten(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.W_query = torch.nn.Parameter(torch.randn(3, 2))
            self.W_key = torch.nn.Parameter(torch.randn(3, 2))
            self.W_value = torch.nn.Parameter(torch.randn(3, 4))

    torch.manual_seed(1)
    handwritten, linear = Handwritten(), SelfAttention(3, 2, 4)
    copy_weights(handwritten, linear)
    x = torch.randn(5, 3)
    expected, _ = scaled_dot_product(x @ handwritten.W_query, x @ handwritten.W_key, x @ handwritten.W_value)
    assert torch.allclose(linear(x), expected, atol=1e-6)


def test_refused_copy_leaves_dst_untouched():
    torch.manual_seed(0)
    src, dst = SelfAttention(3, 2, qkv_bias=True), SelfAttentionParams(3, 2)
    before = {name: p.detach().clone() for name, p in dst.named_parameters()}
    with pytest.raises(ValueError):
        copy_weights(src, dst)
    assert all(torch.equal(p, before[name]) for name, p in dst.named_parameters())
