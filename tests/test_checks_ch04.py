"""The chapter 4 self-checks: the right answer passes, typical wrong answers get their own hint."""

import pytest
import torch

from attention_book.attention import copy_weights
from attention_book.checks import HISTORY, ch04


def hints(verdict):
    return " | ".join(hint for _, hint in verdict.failed)


# --- ex-04-context-vectors -------------------------------------------------------------------------


def context_correct(queries, keys, values):
    scores = queries @ keys.transpose(-2, -1)
    return torch.softmax(scores / keys.shape[-1] ** 0.5, dim=-1) @ values


def test_context_correct_answer_passes():
    verdict = ch04.context_vectors(context_correct)
    assert verdict.ok, verdict
    assert verdict.score == 1.0 and verdict.total == 3
    assert HISTORY["ex-04-context-vectors"] is verdict


def test_context_mT_and_einsum_variants_pass():
    def with_mT(queries, keys, values):
        return torch.softmax(queries @ keys.mT / keys.shape[-1] ** 0.5, dim=-1) @ values

    def with_einsum(queries, keys, values):
        scores = torch.einsum("...qd,...kd->...qk", queries, keys) / keys.shape[-1] ** 0.5
        return torch.einsum("...qk,...kv->...qv", scores.softmax(-1), values)

    assert ch04.context_vectors(with_mT).ok
    assert ch04.context_vectors(with_einsum).ok


def test_context_not_implemented():
    def todo(queries, keys, values):
        raise NotImplementedError("ex-04-context-vectors: your code here")

    verdict = ch04.context_vectors(todo)
    assert verdict.not_implemented and verdict.score == 0.0
    assert "not implemented yet" in str(verdict)


def test_context_wrong_softmax_dim():
    def wrong_dim(queries, keys, values):
        return torch.softmax(queries @ keys.transpose(-2, -1) / keys.shape[-1] ** 0.5, dim=-2) @ values

    verdict = ch04.context_vectors(wrong_dim)
    assert not verdict.ok
    assert "wrong softmax dim" in hints(verdict) and "dim=-1" in hints(verdict)


def test_context_missing_scale():
    def unscaled(queries, keys, values):
        return torch.softmax(queries @ keys.transpose(-2, -1), dim=-1) @ values

    verdict = ch04.context_vectors(unscaled)
    assert "missing scale" in hints(verdict)
    assert verdict.score == 0.0


def test_context_scaled_by_d_k_without_root():
    def no_root(queries, keys, values):
        return torch.softmax(queries @ keys.transpose(-2, -1) / keys.shape[-1], dim=-1) @ values

    assert "square root" in hints(ch04.context_vectors(no_root))


def test_context_scaled_by_value_width():
    def by_d_v(queries, keys, values):
        return torch.softmax(queries @ keys.transpose(-2, -1) / values.shape[-1] ** 0.5, dim=-1) @ values

    verdict = ch04.context_vectors(by_d_v)
    assert "sqrt(d_v)" in hints(verdict)
    assert 0 < verdict.score < 1  # the journey example has d_k = d_v and passes


def test_context_global_d_k():
    d_k = 2  # a notebook variable from the walkthrough

    def global_scale(queries, keys, values):
        return torch.softmax(queries @ keys.transpose(-2, -1) / d_k**0.5, dim=-1) @ values

    assert "read d_k from keys.shape[-1]" in hints(ch04.context_vectors(global_scale))


def test_context_transposed_scores():
    def keys_first(queries, keys, values):
        return torch.softmax(keys @ queries.transpose(-2, -1) / keys.shape[-1] ** 0.5, dim=-1) @ values

    assert "transposed product" in hints(ch04.context_vectors(keys_first))
    assert "queries @ keys.transpose(-2, -1)" in hints(ch04.context_vectors(keys_first))


def test_context_transposed_weights():
    def weights_transposed(queries, keys, values):
        weights = torch.softmax(queries @ keys.transpose(-2, -1) / keys.shape[-1] ** 0.5, dim=-1)
        return weights.transpose(-2, -1) @ values

    verdict = ch04.context_vectors(weights_transposed)
    assert "transposed product" in hints(verdict) and "weights @ values" in hints(verdict)


@pytest.mark.filterwarnings("ignore:The use of `x.T`")
def test_context_dot_T_fails_on_batches_only():
    def dot_T(queries, keys, values):
        return torch.softmax(queries @ keys.T / keys.shape[-1] ** 0.5, dim=-1) @ values

    verdict = ch04.context_vectors(dot_T)
    assert [name for name, _ in verdict.failed] == ["a batch of shape (B, T, d)"]
    assert "keys.transpose(-2, -1)" in hints(verdict)


def test_context_returning_a_tuple():
    def both(queries, keys, values):
        weights = torch.softmax(queries @ keys.transpose(-2, -1) / keys.shape[-1] ** 0.5, dim=-1)
        return weights @ values, weights

    assert "not a tuple" in hints(ch04.context_vectors(both))


def test_context_returning_the_weights():
    def weights_only(queries, keys, values):
        return torch.softmax(queries @ keys.transpose(-2, -1) / keys.shape[-1] ** 0.5, dim=-1)

    assert "multiply the (T, T) weights by the values" in hints(ch04.context_vectors(weights_only))


def test_context_crash_is_reported_not_raised():
    def crashes(queries, keys, values):
        return queries @ values  # (5, 3) @ (5, 4)

    verdict = ch04.context_vectors(crashes)
    assert not verdict.ok and "RuntimeError" in hints(verdict)


# --- ex-04-copy-weights ----------------------------------------------------------------------------

NAMES = ("query", "key", "value")


def copy_correct(params_version, linear_version):
    with torch.no_grad():
        for name in NAMES:
            linear = getattr(linear_version, f"W_{name}")
            linear.weight.copy_(getattr(params_version, f"W_{name}").T)


def test_copy_correct_answer_passes():
    verdict = ch04.copy_weights(copy_correct)
    assert verdict.ok, verdict
    assert verdict.total == 4


def test_copy_package_function_passes():
    assert ch04.copy_weights(copy_weights).ok


def test_copy_not_implemented():
    def todo(params_version, linear_version):
        raise NotImplementedError("ex-04-copy-weights: your code here")

    verdict = ch04.copy_weights(todo)
    assert verdict.not_implemented and "not implemented yet" in str(verdict)


def test_copy_without_transposing():
    def untransposed(params_version, linear_version):
        with torch.no_grad():
            for name in NAMES:
                getattr(linear_version, f"W_{name}").weight.copy_(getattr(params_version, f"W_{name}"))

    verdict = ch04.copy_weights(untransposed)
    assert verdict.score == 0.0
    for _, hint in verdict.failed:  # both the shape error and the silent square case explain it
        assert "weights not transposed" in hint and "(d_out, d_in)" in hint


def test_copy_without_transposing_square_only_is_caught():
    """With d_in == d_out nothing crashes: the check must still notice the layout."""

    def untransposed_if_possible(params_version, linear_version):
        with torch.no_grad():
            for name in NAMES:
                matrix = getattr(params_version, f"W_{name}")
                weight = getattr(linear_version, f"W_{name}").weight
                weight.copy_(matrix if matrix.shape == weight.shape else matrix.T)

    verdict = ch04.copy_weights(untransposed_if_possible)
    failed = dict(verdict.failed)
    assert list(failed) == ["same outputs for square matrices (d_in = d_out = 3) on a batch"]
    assert "weights not transposed" in failed[list(failed)[0]]


def test_copy_without_no_grad():
    def no_guard(params_version, linear_version):
        for name in NAMES:
            getattr(linear_version, f"W_{name}").weight.copy_(getattr(params_version, f"W_{name}").T)

    assert "torch.no_grad()" in hints(ch04.copy_weights(no_guard))


def test_copy_assigning_a_plain_tensor():
    def assign(params_version, linear_version):
        for name in NAMES:
            getattr(linear_version, f"W_{name}").weight = getattr(params_version, f"W_{name}").T

    assert "only be replaced by an nn.Parameter" in hints(ch04.copy_weights(assign))


def test_copy_sharing_memory():
    def share(params_version, linear_version):
        for name in NAMES:
            matrix = getattr(params_version, f"W_{name}")
            getattr(linear_version, f"W_{name}").weight = torch.nn.Parameter(matrix.T)

    verdict = ch04.copy_weights(share)
    assert [name for name, _ in verdict.failed] == ["the two modules do not share memory afterwards"]
    assert "share memory" in hints(verdict)


def test_copy_swapped_query_and_key():
    def swapped(params_version, linear_version):
        with torch.no_grad():
            linear_version.W_query.weight.copy_(params_version.W_key.T)
            linear_version.W_key.weight.copy_(params_version.W_query.T)
            linear_version.W_value.weight.copy_(params_version.W_value.T)

    assert "W_query of the nn.Linear version holds W_key" in hints(ch04.copy_weights(swapped))


def test_copy_forgetting_the_values():
    def two_of_three(params_version, linear_version):
        with torch.no_grad():
            for name in ("query", "key"):
                getattr(linear_version, f"W_{name}").weight.copy_(getattr(params_version, f"W_{name}").T)

    assert "copy all three" in hints(ch04.copy_weights(two_of_three))
