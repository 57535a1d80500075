"""Chapter 9 self-checks: right answers pass, typical wrong answers get their specific hint."""

import math

import pytest
import torch
import torch.nn.functional as F

from attention_book.checks import ch09


# ---------------------------------------------------------------- ex-09-flops
def correct_flops(batch_size, num_tokens, d_model, num_heads):
    projections = 4 * 2 * batch_size * num_tokens * d_model * d_model
    core = 2 * 2 * batch_size * num_tokens * num_tokens * d_model
    return projections + core


def correct_flops_per_head(batch_size, num_tokens, d_model, num_heads):  # summed head by head
    head_dim = d_model // num_heads
    core = num_heads * 2 * (2 * batch_size * num_tokens * num_tokens * head_dim)
    return 8 * batch_size * num_tokens * d_model**2 + core


def correct_flops_float(batch_size, num_tokens, d_model, num_heads):
    return float(correct_flops(batch_size, num_tokens, d_model, num_heads))


def flops_as_macs(B, T, d, H):
    return correct_flops(B, T, d, H) // 2


def flops_times_heads(B, T, d, H):
    return 8 * B * T * d * d + H * 4 * B * T * T * d


def flops_core_only(B, T, d, H):
    return 4 * B * T * T * d


def flops_projections_only(B, T, d, H):
    return 8 * B * T * d * d


def flops_one_product(B, T, d, H):
    return 8 * B * T * d * d + 2 * B * T * T * d


def flops_three_projections(B, T, d, H):
    return 6 * B * T * d * d + 4 * B * T * T * d


def flops_not_implemented(B, T, d, H):
    raise NotImplementedError("ex-09-flops: ...")


def flops_no_return(B, T, d, H):
    correct_flops(B, T, d, H)


@pytest.mark.parametrize("answer", [correct_flops, correct_flops_per_head, correct_flops_float])
def test_flops_correct_answers_pass(answer):
    verdict = ch09.flops(answer)
    assert verdict.ok, verdict.summary()


@pytest.mark.parametrize("answer, hint", [
    (flops_as_macs, "multiply-adds"),
    (flops_times_heads, "once per head"),
    (flops_core_only, "only the attention core"),
    (flops_projections_only, "only the projections"),
    (flops_one_product, "only one of the two"),
    (flops_three_projections, "out_proj"),
    (flops_no_return, "forget `return`"),
])
def test_flops_wrong_answers_get_their_hint(answer, hint):
    verdict = ch09.flops(answer)
    assert not verdict.ok
    assert any(hint in message for _, message in verdict.failed), verdict.summary()


def test_flops_heads_dependence_is_caught():
    verdict = ch09.flops(flops_times_heads)
    assert "the count does not depend on the number of heads" in [name for name, _ in verdict.failed]


def test_flops_not_implemented():
    verdict = ch09.flops(flops_not_implemented)
    assert verdict.not_implemented and verdict.score == 0


# ---------------------------------------------------------------- ex-09-kv-step
def correct_step(query, new_key, new_value, cache_keys, cache_values):
    keys = torch.cat([cache_keys, new_key], dim=-2)
    values = torch.cat([cache_values, new_value], dim=-2)
    weights = torch.softmax(query @ keys.transpose(-2, -1) / math.sqrt(query.shape[-1]), dim=-1)
    return weights @ values, keys, values


def correct_step_sdpa(query, new_key, new_value, cache_keys, cache_values):
    keys = torch.cat([cache_keys, new_key], dim=-2)
    values = torch.cat([cache_values, new_value], dim=-2)
    return F.scaled_dot_product_attention(query, keys, values), keys, values


def step_no_append(query, new_key, new_value, cache_keys, cache_values):
    weights = torch.softmax(query @ cache_keys.transpose(-2, -1) / math.sqrt(query.shape[-1]), -1)
    return weights @ cache_values, cache_keys, cache_values


def step_wrong_dim(query, new_key, new_value, cache_keys, cache_values):
    keys = torch.cat([cache_keys, new_key], dim=1)
    values = torch.cat([cache_values, new_value], dim=1)
    return correct_step(query, new_key, new_value, cache_keys, cache_values)[0], keys, values


def step_new_first(query, new_key, new_value, cache_keys, cache_values):
    context, _, _ = correct_step(query, new_key, new_value, cache_keys, cache_values)
    return context, torch.cat([new_key, cache_keys], -2), torch.cat([new_value, cache_values], -2)


def step_unscaled(query, new_key, new_value, cache_keys, cache_values):
    keys = torch.cat([cache_keys, new_key], dim=-2)
    values = torch.cat([cache_values, new_value], dim=-2)
    return torch.softmax(query @ keys.transpose(-2, -1), dim=-1) @ values, keys, values


def step_is_causal(query, new_key, new_value, cache_keys, cache_values):
    keys = torch.cat([cache_keys, new_key], dim=-2)
    values = torch.cat([cache_values, new_value], dim=-2)
    return F.scaled_dot_product_attention(query, keys, values, is_causal=True), keys, values


def step_wrong_softmax_dim(query, new_key, new_value, cache_keys, cache_values):
    keys = torch.cat([cache_keys, new_key], dim=-2)
    values = torch.cat([cache_values, new_value], dim=-2)
    weights = torch.softmax(query @ keys.transpose(-2, -1) / math.sqrt(query.shape[-1]), dim=-2)
    return weights @ values, keys, values


def step_swapped(query, new_key, new_value, cache_keys, cache_values):
    context, keys, values = correct_step(query, new_key, new_value, cache_keys, cache_values)
    return context, values, keys


def step_only_context(query, new_key, new_value, cache_keys, cache_values):
    return correct_step(query, new_key, new_value, cache_keys, cache_values)[0]


def step_not_implemented(*args):
    raise NotImplementedError("ex-09-kv-step: ...")


@pytest.mark.parametrize("answer", [correct_step, correct_step_sdpa])
def test_kv_step_correct_answers_pass(answer):
    verdict = ch09.kv_step(answer)
    assert verdict.ok, verdict.summary()


@pytest.mark.parametrize("answer, hint", [
    (step_no_append, "still have 5 tokens"),
    (step_wrong_dim, "dim=-2"),
    (step_new_first, "at the front"),
    (step_unscaled, "not scaled"),
    (step_is_causal, "top-left"),
    (step_wrong_softmax_dim, "wrong dimension"),
    (step_swapped, "swapped"),
    (step_only_context, "three tensors"),
])
def test_kv_step_wrong_answers_get_their_hint(answer, hint):
    verdict = ch09.kv_step(answer)
    assert not verdict.ok
    assert any(hint in message for _, message in verdict.failed), verdict.summary()


def test_kv_step_not_implemented():
    verdict = ch09.kv_step(step_not_implemented)
    assert verdict.not_implemented and verdict.score == 0


def test_kv_step_wrong_answers_score_partially():
    assert 0 < ch09.kv_step(step_unscaled).score < 1
