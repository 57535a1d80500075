"""Chapter 1's self-checks: correct answers pass, typical mistakes get their specific hint."""

from __future__ import annotations

import torch

from attention_book.checks import ch01


def hints(verdict):
    return " | ".join(hint for _, hint in verdict.failed)


def correct_one_hot(token_ids, weight):
    return torch.nn.functional.one_hot(token_ids, num_classes=weight.shape[0]).to(weight.dtype) @ weight


def test_one_hot_correct_passes():
    assert ch01.one_hot_embedding(correct_one_hot).ok


def test_one_hot_num_classes_guessed_from_ids():
    verdict = ch01.one_hot_embedding(lambda ids, w: torch.nn.functional.one_hot(ids).to(w.dtype) @ w)
    assert "num_classes=weight.shape[0]" in hints(verdict)


def test_one_hot_transposed():
    verdict = ch01.one_hot_embedding(lambda ids, w: w.T @ correct_one_hot(ids, torch.eye(w.shape[0])).T)
    assert "transposed" in hints(verdict)


def test_one_hot_float_instead_of_weight_dtype():
    verdict = ch01.one_hot_embedding(
        lambda ids, w: torch.nn.functional.one_hot(ids, num_classes=w.shape[0]).float() @ w.float())
    assert 0 < verdict.score < 1 and ".to(weight.dtype)" in hints(verdict)


def test_one_hot_not_implemented():
    def stub(ids, weight):
        raise NotImplementedError("ex-01-one-hot: write your solution here")

    assert ch01.one_hot_embedding(stub).not_implemented


def correct_positions(token_embeddings, position_embedding):
    return token_embeddings + position_embedding(torch.arange(token_embeddings.shape[1]))


def test_positions_correct_passes():
    assert ch01.positions(correct_positions).ok


def test_positions_typical_mistakes():
    concatenated = lambda t, p: torch.cat([t, p(torch.arange(t.shape[1])).expand_as(t)], dim=-1)  # noqa: E731
    assert "concatenated" in hints(ch01.positions(concatenated))
    batch_axis = lambda t, p: t + p(torch.arange(t.shape[0])).unsqueeze(1)  # noqa: E731
    assert "batch axis" in hints(ch01.positions(batch_axis))
    from_one = lambda t, p: t + p(torch.arange(1, t.shape[1] + 1))  # noqa: E731
    assert "start at 1" in hints(ch01.positions(from_one))
    only_positions = lambda t, p: p(torch.arange(t.shape[1])).expand_as(t)  # noqa: E731
    assert "add the token embeddings too" in hints(ch01.positions(only_positions))
    forgot = lambda t, p: t.clone()  # noqa: E731
    assert "were not added" in hints(ch01.positions(forgot))
    fixed_length = lambda t, p: t + p(torch.arange(5))  # noqa: E731
    verdict = ch01.positions(fixed_length)
    assert 0 < verdict.score < 1 and "read T from the input shape" in hints(verdict)


def test_checks_leave_the_readers_random_state_untouched():
    torch.manual_seed(42)
    expected = torch.rand(3)
    torch.manual_seed(42)
    ch01.positions(correct_positions)
    ch01.one_hot_embedding(correct_one_hot)
    assert torch.equal(torch.rand(3), expected), "a self-check changed the global random state"
