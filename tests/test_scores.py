"""Unit tests of attention_book.scores (chapters 2 and 3)."""

import math

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from attention_book.data import journey_inputs
from attention_book.scores import (
    attention_entropy,
    attention_scores,
    naive_softmax,
    scaled_attention_weights,
    stable_softmax,
    sum_normalize,
)


@pytest.fixture
def journey():
    return journey_inputs()[1]  # (6, 3)


def source_weights():
    """W_query, W_key, W_value drawn as in the source: seed 123, three (3, 2) randn draws."""
    torch.manual_seed(123)
    return torch.randn(3, 2), torch.randn(3, 2), torch.randn(3, 2)


# --- attention_scores ---------------------------------------------------------------------------


def test_scores_match_explicit_dot_products():
    generator = torch.Generator().manual_seed(0)
    queries, keys = torch.randn(3, 4, generator=generator), torch.randn(5, 4, generator=generator)
    scores = attention_scores(queries, keys)
    assert scores.shape == (3, 5)
    for i in range(3):
        for j in range(5):
            assert math.isclose(float(scores[i, j]), float(torch.dot(queries[i], keys[j])), abs_tol=1e-6)


def test_scores_of_journey_query_2_match_the_source(journey):
    scores = attention_scores(journey[1], journey)  # one query -> (6,)
    expected = torch.tensor([0.9544, 1.4950, 1.4754, 0.8434, 0.7070, 1.0865])
    assert scores.shape == (6,)
    assert torch.allclose(scores, expected, atol=5e-5)


def test_projected_scores_match_the_source(journey):
    W_query, W_key, _ = source_weights()
    queries, keys = journey @ W_query, journey @ W_key
    scores = attention_scores(queries, keys)
    assert torch.allclose(queries[1], torch.tensor([-1.1729, -0.0048]), atol=5e-5)
    expected_row_2 = torch.tensor([0.2172, 0.1376, 0.1730, -0.0491, 0.7616, -0.3809])
    assert torch.allclose(scores[1], expected_row_2, atol=5e-5)
    # omega_22 pairs query 2 with key 2: index 1 (the source's keys[2] gives omega_23 = 0.1730)
    assert math.isclose(float(torch.dot(queries[1], keys[1])), 0.1376, abs_tol=5e-5)


def test_scores_batched():
    generator = torch.Generator().manual_seed(1)
    queries, keys = torch.randn(2, 3, 4, generator=generator), torch.randn(2, 5, 4, generator=generator)
    scores = attention_scores(queries, keys)
    assert scores.shape == (2, 3, 5)
    assert torch.allclose(scores[1], queries[1] @ keys[1].T)


def test_scores_mismatched_d_k_says_both_shapes():
    with pytest.raises(ValueError, match=r"same length d_k.*\(6, 3\).*\(6, 2\)"):
        attention_scores(torch.zeros(6, 3), torch.zeros(6, 2))


def test_scores_rejects_one_dimensional_keys():
    with pytest.raises(ValueError, match="one key per row"):
        attention_scores(torch.zeros(3), torch.zeros(3))


def test_scores_rejects_non_tensors_and_integers():
    with pytest.raises(TypeError, match="torch.tensor"):
        attention_scores([[1.0, 2.0]], torch.zeros(2, 2))
    with pytest.raises(TypeError, match=r"\.float\(\)"):
        attention_scores(torch.ones(2, 2, dtype=torch.long), torch.zeros(2, 2))


# --- normalisations -----------------------------------------------------------------------------


def test_sum_normalize_of_journey_scores_matches_source(journey):
    weights = sum_normalize(journey @ journey[1])
    assert torch.allclose(weights, torch.tensor([0.1455, 0.2278, 0.2249, 0.1285, 0.1077, 0.1656]), atol=5e-5)


def test_sum_normalize_gives_negative_weights_for_negative_scores():
    weights = sum_normalize(torch.tensor([2.0, -1.0, 0.5]))
    assert float(weights.sum()) == pytest.approx(1.0)
    assert (weights < 0).any()


def test_softmax_of_journey_scores_matches_source(journey):
    expected = torch.tensor([0.1385, 0.2379, 0.2333, 0.1240, 0.1082, 0.1581])
    scores = journey @ journey[1]
    assert torch.allclose(naive_softmax(scores), expected, atol=5e-5)
    assert torch.allclose(stable_softmax(scores), expected, atol=5e-5)


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_stable_softmax_equals_torch(dim):
    scores = torch.randn(4, 7, generator=torch.Generator().manual_seed(2)) * 3
    assert torch.allclose(stable_softmax(scores, dim=dim), torch.softmax(scores, dim=dim), atol=1e-6)


def test_naive_softmax_overflows_and_stable_does_not():
    scores = torch.tensor([1000.0, 1001.0, 1002.0])
    assert torch.isnan(naive_softmax(scores)).all()
    stable = stable_softmax(scores)
    assert torch.isfinite(stable).all()
    assert torch.allclose(stable, torch.tensor([0.0900, 0.2447, 0.6652]), atol=5e-5)


def test_stable_softmax_is_shift_invariant():
    scores = torch.tensor([[0.3, -1.2, 2.0]])
    assert torch.allclose(stable_softmax(scores), stable_softmax(scores + 50.0), atol=1e-6)


def test_temperature_sharpens_and_flattens():
    scores = torch.tensor([1.0, 2.0, 3.0])
    cold, warm, hot = (stable_softmax(scores, temperature=t) for t in (0.1, 1.0, 100.0))
    assert torch.allclose(stable_softmax(scores, temperature=2.0), torch.softmax(scores / 2, dim=-1))
    assert cold.max() > warm.max() > hot.max()
    assert float(cold[2]) > 0.99
    assert torch.allclose(hot, torch.full((3,), 1 / 3), atol=0.01)


@pytest.mark.parametrize("temperature", [0.0, -1.0, float("inf"), float("nan")])
def test_bad_temperature_raises(temperature):
    with pytest.raises(ValueError, match="temperature must be a finite number > 0"):
        stable_softmax(torch.zeros(3), temperature=temperature)


def test_temperature_must_be_a_number():
    with pytest.raises(TypeError, match="temperature"):
        stable_softmax(torch.zeros(3), temperature="hot")


def test_bad_dim_raises_with_advice():
    with pytest.raises(ValueError, match="dim=-1"):
        stable_softmax(torch.zeros(2, 3), dim=2)
    with pytest.raises(ValueError, match="single number"):
        stable_softmax(torch.tensor(1.0))


def test_masked_entries_get_zero_weight():
    scores = torch.tensor([[1.0, float("-inf"), 2.0]])
    weights = stable_softmax(scores)
    assert float(weights[0, 1]) == 0.0
    assert torch.allclose(weights, torch.softmax(scores, dim=-1))


def test_stable_softmax_gradient_matches_torch():
    scores = torch.randn(3, 4, generator=torch.Generator().manual_seed(3), requires_grad=True)
    target = torch.randn(3, 4, generator=torch.Generator().manual_seed(4))
    (stable_softmax(scores) * target).sum().backward()
    ours = scores.grad.clone()
    scores.grad = None
    (torch.softmax(scores, dim=-1) * target).sum().backward()
    assert torch.allclose(ours, scores.grad, atol=1e-6)


# --- scaled weights -----------------------------------------------------------------------------


def test_scaled_weights_match_the_source(journey):
    W_query, W_key, _ = source_weights()
    weights = scaled_attention_weights(journey[1] @ W_query, journey @ W_key)
    expected = torch.tensor([0.1704, 0.1611, 0.1652, 0.1412, 0.2505, 0.1117])
    assert torch.allclose(weights, expected, atol=5e-5)


@pytest.mark.parametrize("d_k", [1, 2, 16, 64])
def test_scaled_weights_use_keys_width(d_k):
    generator = torch.Generator().manual_seed(d_k)
    queries, keys = torch.randn(3, d_k, generator=generator), torch.randn(5, d_k, generator=generator)
    expected = torch.softmax(queries @ keys.T / math.sqrt(d_k), dim=-1)
    weights = scaled_attention_weights(queries, keys)
    assert torch.allclose(weights, expected, atol=1e-6)
    assert torch.allclose(weights.sum(dim=-1), torch.ones(3))


def test_scaled_weights_shape_error():
    with pytest.raises(ValueError, match="same length d_k"):
        scaled_attention_weights(torch.zeros(2, 4), torch.zeros(3, 5))


# --- entropy ------------------------------------------------------------------------------------


def test_entropy_extremes():
    uniform = torch.full((1, 4), 0.25)
    one_hot = torch.tensor([[0.0, 1.0, 0.0, 0.0]])
    assert float(attention_entropy(uniform)[0]) == pytest.approx(math.log(4))
    assert float(attention_entropy(one_hot)[0]) == pytest.approx(0.0)


def test_entropy_rejects_negative_weights():
    with pytest.raises(ValueError, match="non-negative"):
        attention_entropy(torch.tensor([0.5, -0.5, 1.0]))


def test_entropy_gradient_through_masked_weights_is_finite():
    """A masked key has weight exactly 0; w * log(w) has an infinite slope there, and 0 * inf = NaN
    used to reach the scores (torch.xlogy(w, w) too). With log(1) at w = 0 the gradient is finite
    and correct."""
    from attention_book.functional import masked_softmax

    scores = torch.tensor([[0.5, 1.0, -0.3], [0.2, 0.1, 0.4]], requires_grad=True)
    hide = torch.tensor([[False, True, False], [True, True, True]])  # row 1: nothing visible
    weights = masked_softmax(scores, hide)
    broken = -torch.xlogy(weights, weights).sum()  # what the test guards against
    assert torch.isnan(torch.autograd.grad(broken, scores, retain_graph=True)[0]).any()
    attention_entropy(weights).sum().backward()
    assert torch.isfinite(scores.grad).all()
    assert torch.all(scores.grad[hide] == 0)
    # the visible part: the gradient of the entropy of softmax([0.5, -0.3]), written independently
    visible = torch.tensor([0.5, -0.3], requires_grad=True)
    p = torch.softmax(visible, dim=-1)
    (-(p * p.log()).sum()).backward()
    assert torch.allclose(scores.grad[0, [0, 2]], visible.grad, atol=1e-6)


def test_entropy_gradient_of_weights_is_minus_log_w_minus_one():
    weights = torch.tensor([0.2, 0.3, 0.5, 0.0], requires_grad=True)
    attention_entropy(weights).backward()
    expected = -(torch.log(weights[:3].detach()) + 1)
    assert torch.allclose(weights.grad[:3], expected) and weights.grad[3] == 0


# --- the chapter's written-out softmaxes against the attention core ------------------------------


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("temperature", [0.3, 1.0, 4.0])
def test_stable_softmax_equals_the_core_with_minus_inf_as_mask(seed, temperature):
    """stable_softmax treats -inf scores as hidden: it equals the core's masked_softmax with the
    mask ``scores == -inf``, all-hidden rows included (zeros, not NaN)."""
    from attention_book.functional import masked_softmax

    generator = torch.Generator().manual_seed(seed)
    scores = torch.randn(4, 5, generator=generator) * 3
    hide = torch.rand(4, 5, generator=generator) < 0.5
    hide[0] = True  # one row with nothing visible
    scores = scores.masked_fill(hide, float("-inf"))
    expected = masked_softmax(scores.masked_fill(hide, 0.0) / temperature, hide)
    weights = stable_softmax(scores, temperature=temperature)
    assert torch.allclose(weights, expected, atol=1e-6)
    assert torch.equal(weights[0], torch.zeros(5))


def test_stable_softmax_all_minus_inf_row_has_zero_gradient():
    scores = torch.tensor([[float("-inf")] * 3, [1.0, 2.0, float("-inf")]], requires_grad=True)
    (stable_softmax(scores) * torch.tensor([[1.0, 2.0, 3.0], [1.0, -1.0, 2.0]])).sum().backward()
    assert torch.isfinite(scores.grad).all() and torch.all(scores.grad[0] == 0)


@pytest.mark.parametrize("seed", range(5))
def test_naive_softmax_equals_the_core_on_moderate_scores(seed):
    from attention_book.functional import masked_softmax

    scores = torch.randn(3, 6, generator=torch.Generator().manual_seed(seed)) * 5
    assert torch.allclose(naive_softmax(scores), masked_softmax(scores), atol=1e-6)
    assert torch.allclose(naive_softmax(scores, dim=0), masked_softmax(scores, dim=0), atol=1e-6)


def test_scaled_weights_are_the_cores_weights():
    from attention_book.functional import scaled_dot_product_attention

    generator = torch.Generator().manual_seed(0)
    queries, keys = torch.randn(2, 4, 8, generator=generator), torch.randn(2, 5, 8, generator=generator)
    _, expected = scaled_dot_product_attention(queries, keys, torch.zeros(2, 5, 1))
    assert torch.equal(scaled_attention_weights(queries, keys), expected)


# ----------------------------------------------------------------- additive scores (chapter 2)


def test_additive_scores_equal_the_formula_pair_by_pair():
    from attention_book.scores import additive_scores

    generator = torch.Generator().manual_seed(0)
    queries, keys = torch.randn(4, 3, generator=generator), torch.randn(5, 2, generator=generator)
    W_query, W_key = torch.randn(3, 6, generator=generator), torch.randn(2, 6, generator=generator)
    v = torch.randn(6, generator=generator)
    scores = additive_scores(queries, keys, W_query, W_key, v)
    assert scores.shape == (4, 5)
    for i in range(4):
        for j in range(5):
            expected = torch.dot(v, torch.tanh(queries[i] @ W_query + keys[j] @ W_key))
            assert torch.allclose(scores[i, j], expected, atol=1e-6)
    # batches: each sequence on its own
    batched = additive_scores(torch.stack([queries, 2 * queries]), torch.stack([keys, keys]), W_query, W_key, v)
    assert batched.shape == (2, 4, 5)
    assert torch.allclose(batched[0], scores) and torch.allclose(batched[1], additive_scores(2 * queries, keys, W_query, W_key, v))


def test_additive_scores_are_bounded_by_the_sum_of_v():
    from attention_book.scores import additive_scores

    generator = torch.Generator().manual_seed(1)
    queries, keys = torch.randn(3, 4, generator=generator), torch.randn(6, 4, generator=generator)
    W_query, W_key, v = (torch.randn(4, 5, generator=generator), torch.randn(4, 5, generator=generator),
                         torch.randn(5, generator=generator))
    for stretch in (1.0, 100.0, 1e4):
        assert additive_scores(queries, stretch * keys, W_query, W_key, v).abs().max() <= v.abs().sum() + 1e-5


def test_additive_scores_reject_mismatched_widths():
    from attention_book.scores import additive_scores

    q, k = torch.zeros(2, 3), torch.zeros(2, 4)
    with pytest.raises(ValueError, match="W_query"):
        additive_scores(q, k, torch.zeros(4, 5), torch.zeros(4, 5), torch.zeros(5))
    with pytest.raises(ValueError, match="hidden width d_h"):
        additive_scores(q, k, torch.zeros(3, 5), torch.zeros(4, 6), torch.zeros(5))


# ----------------------------------------------------------------- soft-capping (chapter 3)


def test_soft_cap_is_cap_times_tanh_and_bounded():
    from attention_book.scores import soft_cap

    scores = torch.tensor([-1e4, -60.0, -1.0, 0.0, 0.5, 10.0, 49.0, 1e4])
    capped = soft_cap(scores, 50.0)
    assert torch.allclose(capped, 50.0 * torch.tanh(scores / 50.0))
    assert capped.abs().max() <= 50.0
    assert torch.all(capped[1:] >= capped[:-1])  # keeps the order
    assert abs(capped[4].item() - 0.5) < 1e-4  # small scores barely change
    assert scores[0].item() == -1e4  # the input is unchanged


@given(st.floats(min_value=0.01, max_value=1e3), st.integers(min_value=0, max_value=2**31 - 1))
def test_soft_cap_never_exceeds_the_cap_and_keeps_the_sign(cap, seed):
    from attention_book.scores import soft_cap

    scores = 100.0 * torch.randn(20, generator=torch.Generator().manual_seed(seed))
    capped = soft_cap(scores, cap)
    assert capped.abs().max() <= cap * (1 + 1e-6)
    assert torch.equal(torch.sign(capped), torch.sign(scores)) or bool((capped.abs() < 1e-30).any())
