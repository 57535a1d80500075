"""Tests of chapter 3's self-checks: right answers pass, typical wrong answers get their hint."""

import math

import torch

from attention_book.checks import ch03


def hints(verdict):
    return " | ".join(hint for _, hint in verdict.failed)


# --- ex-03-stable-softmax -------------------------------------------------------------------------


def good_softmax(scores, dim=-1):
    shifted = scores - scores.amax(dim=dim, keepdim=True)
    exponentials = torch.exp(shifted)
    return exponentials / exponentials.sum(dim=dim, keepdim=True)


def test_stable_softmax_correct():
    verdict = ch03.stable_softmax(good_softmax)
    assert verdict.ok, str(verdict)


def test_stable_softmax_without_max_overflows():
    def naive(scores, dim=-1):
        exponentials = torch.exp(scores)
        return exponentials / exponentials.sum(dim=dim, keepdim=True)

    verdict = ch03.stable_softmax(naive)
    assert not verdict.ok
    assert "overflow" in hints(verdict)
    assert "Subtract each row's maximum" in hints(verdict)
    assert "underflow" in hints(verdict)
    assert verdict.score == 0.6  # the small-score tests still pass


def test_stable_softmax_wrong_dim():
    verdict = ch03.stable_softmax(lambda s, dim=-1: good_softmax(s, dim=0))
    assert "wrong softmax dim" in hints(verdict)


def test_stable_softmax_ignores_dim():
    verdict = ch03.stable_softmax(lambda s, dim=-1: good_softmax(s, dim=-1))
    assert "ignores its dim argument" in hints(verdict)


def test_stable_softmax_without_keepdim():
    def no_keepdim(scores, dim=-1):
        exponentials = torch.exp(scores - scores.amax(dim=dim))
        return exponentials / exponentials.sum(dim=dim)

    verdict = ch03.stable_softmax(no_keepdim)
    assert "keepdim=True" in hints(verdict)


def test_stable_softmax_divides_by_sum():
    verdict = ch03.stable_softmax(lambda s, dim=-1: s / s.sum(dim=dim, keepdim=True))
    assert "you divided the scores by their sum" in hints(verdict)


def test_stable_softmax_must_not_call_torch_softmax():
    for cheat in (
        lambda s, dim=-1: torch.softmax(s, dim=dim),
        lambda s, dim=-1: torch.nn.functional.softmax(s, dim=dim),
        lambda s, dim=-1: s.softmax(dim=dim),
    ):
        verdict = ch03.stable_softmax(cheat)
        assert "calling torch.softmax is not allowed" in hints(verdict)
        assert verdict.score == 0.8
    # the patch is undone afterwards
    assert torch.allclose(torch.softmax(torch.zeros(2), dim=0), torch.tensor([0.5, 0.5]))


def test_stable_softmax_not_implemented():
    def stub(scores, dim=-1):
        raise NotImplementedError("ex-03-stable-softmax")

    verdict = ch03.stable_softmax(stub)
    assert verdict.not_implemented
    assert "not implemented yet" in verdict.summary()


# --- ex-03-scaled-weights -------------------------------------------------------------------------


def good_weights(queries, keys):
    scores = queries @ keys.T  # (T_q, T_k)
    return torch.softmax(scores / keys.shape[-1] ** 0.5, dim=-1)


def test_scaled_weights_correct():
    verdict = ch03.scaled_weights(good_weights)
    assert verdict.ok, str(verdict)


def test_scaled_weights_missing_scale():
    verdict = ch03.scaled_weights(lambda q, k: torch.softmax(q @ k.T, dim=-1))
    assert "missing scale" in hints(verdict)


def test_scaled_weights_divided_by_d_k():
    verdict = ch03.scaled_weights(lambda q, k: torch.softmax(q @ k.T / k.shape[-1], dim=-1))
    assert "you divided by d_k" in hints(verdict)


def test_scaled_weights_wrong_dim():
    verdict = ch03.scaled_weights(lambda q, k: torch.softmax(q @ k.T / k.shape[-1] ** 0.5, dim=0))
    assert "wrong softmax dim" in hints(verdict)


def test_scaled_weights_transposed():
    verdict = ch03.scaled_weights(lambda q, k: torch.softmax(k @ q.T / k.shape[-1] ** 0.5, dim=-1))
    assert "transposed" in hints(verdict)


def test_scaled_weights_global_d_k():
    d_k = 8  # a notebook global, the source's mistake

    verdict = ch03.scaled_weights(lambda q, k: torch.softmax(q @ k.T / d_k**0.5, dim=-1))
    assert "read d_k from keys.shape[-1]" in hints(verdict)
    assert not verdict.ok


def test_scaled_weights_number_of_tokens():
    verdict = ch03.scaled_weights(lambda q, k: torch.softmax(q @ k.T / math.sqrt(k.shape[0]), dim=-1))
    assert "number of tokens" in hints(verdict)


def test_scaled_weights_naive_softmax_overflows():
    def naive(q, k):
        exponentials = torch.exp(q @ k.T / k.shape[-1] ** 0.5)
        return exponentials / exponentials.sum(dim=-1, keepdim=True)

    verdict = ch03.scaled_weights(naive)
    assert "overflow" in hints(verdict)
    assert verdict.score == 0.75


def test_scaled_weights_not_implemented():
    def stub(queries, keys):
        raise NotImplementedError

    assert ch03.scaled_weights(stub).not_implemented


# --- ex-03-temperature ----------------------------------------------------------------------------


def good_temperature(scores, temperature):
    if temperature <= 0:
        raise ValueError("temperature must be > 0")
    scaled = scores / temperature
    exponentials = torch.exp(scaled - scaled.amax(dim=-1, keepdim=True))
    return exponentials / exponentials.sum(dim=-1, keepdim=True)


def test_temperature_correct():
    verdict = ch03.temperature_softmax(good_temperature)
    assert verdict.ok, str(verdict)


def test_temperature_multiplied():
    verdict = ch03.temperature_softmax(lambda s, t: torch.softmax(s * t, dim=-1) if t > 0 else 1 / 0)
    assert "you multiplied by the temperature" in hints(verdict)


def test_temperature_ignored():
    verdict = ch03.temperature_softmax(lambda s, t: good_temperature(s, 1.0))
    assert "the temperature changes nothing" in hints(verdict)


def test_temperature_no_validation():
    verdict = ch03.temperature_softmax(lambda s, t: torch.softmax(s / t, dim=-1))
    assert "temperature=0 must raise ValueError" in hints(verdict)
    assert verdict.score == 0.75


def test_temperature_wrong_dim():
    verdict = ch03.temperature_softmax(lambda s, t: torch.softmax(s / t, dim=0) if t > 0 else 1 / 0)
    assert "wrong softmax dim" in hints(verdict)


def test_temperature_naive_overflows_when_cold():
    def naive(scores, temperature):
        if temperature <= 0:
            raise ValueError
        exponentials = torch.exp(scores / temperature)
        return exponentials / exponentials.sum(dim=-1, keepdim=True)

    verdict = ch03.temperature_softmax(naive)
    assert "overflow" in hints(verdict)


def test_temperature_not_implemented():
    def stub(scores, temperature):
        raise NotImplementedError

    assert ch03.temperature_softmax(stub).not_implemented
