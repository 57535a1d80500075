"""The chapter 6 self-checks: the right answer passes, typical wrong answers get their own hint."""

import pytest
import torch

from attention_book.checks import ch06


def hints(verdict):
    return " | ".join(hint for _, hint in verdict.failed)


# --- ex-06-cross ---------------------------------------------------------------------------------


def cross_correct(x, context, W_query, W_key, W_value):
    queries = x @ W_query
    keys = context @ W_key
    values = context @ W_value
    weights = torch.softmax(queries @ keys.T / keys.shape[-1] ** 0.5, dim=-1)
    return weights @ values, weights


def test_cross_correct_answer_passes():
    verdict = ch06.cross(cross_correct)
    assert verdict.ok, verdict
    assert verdict.score == 1.0 and verdict.total == 8


def test_cross_not_implemented():
    def todo(x, context, W_query, W_key, W_value):
        raise NotImplementedError("ex-06-cross: your code here")

    verdict = ch06.cross(todo)
    assert verdict.not_implemented and verdict.score == 0.0
    assert "not implemented yet" in str(verdict)


def test_cross_sequences_swapped():
    def swapped(x, context, W_query, W_key, W_value):
        return cross_correct(context, x, W_query, W_key, W_value)  # queries from the context

    verdict = ch06.cross(swapped)
    assert not verdict.ok
    assert "queries must come from x" in hints(verdict)


def test_cross_queries_and_keys_swapped_products_do_not_fit():
    def keys_from_x(x, context, W_query, W_key, W_value):
        queries = context @ W_query
        keys = x @ W_key
        values = context @ W_value
        weights = torch.softmax(queries @ keys.T / keys.shape[-1] ** 0.5, dim=-1)
        return weights @ values, weights

    verdict = ch06.cross(keys_from_x)
    assert not verdict.ok
    assert "matrix products do not fit" in hints(verdict)


def test_cross_softmax_over_wrong_dim():
    def wrong_dim(x, context, W_query, W_key, W_value):
        queries, keys, values = x @ W_query, context @ W_key, context @ W_value
        weights = torch.softmax(queries @ keys.T / keys.shape[-1] ** 0.5, dim=0)
        return weights @ values, weights

    verdict = ch06.cross(wrong_dim)
    assert "softmax ran over the queries (dim=0)" in hints(verdict)


def test_cross_missing_scale():
    def unscaled(x, context, W_query, W_key, W_value):
        queries, keys, values = x @ W_query, context @ W_key, context @ W_value
        weights = torch.softmax(queries @ keys.T, dim=-1)
        return weights @ values, weights

    verdict = ch06.cross(unscaled)
    assert "not scaled" in hints(verdict)
    assert verdict.score < 1.0


def test_cross_scaled_by_embedding_size():
    def by_d_in(x, context, W_query, W_key, W_value):
        queries, keys, values = x @ W_query, context @ W_key, context @ W_value
        weights = torch.softmax(queries @ keys.T / x.shape[-1] ** 0.5, dim=-1)
        return weights @ values, weights

    assert "sqrt(d_in)" in hints(ch06.cross(by_d_in))


def test_cross_values_from_wrong_place():
    def weights_only(x, context, W_query, W_key, W_value):
        out, weights = cross_correct(x, context, W_query, W_key, W_value)
        return weights @ context, weights  # forgot the value projection

    verdict = ch06.cross(weights_only)
    assert "context vectors are not" in hints(verdict) or "expected weights" in hints(verdict)


def test_cross_returns_a_single_tensor():
    verdict = ch06.cross(lambda *args: cross_correct(*args)[0])
    assert "must return a pair" in hints(verdict)


# --- ex-06-padding -------------------------------------------------------------------------------


def padded_correct(scores, key_padding_mask):
    mask = key_padding_mask[:, None, :]
    fully_padded = mask.all(dim=-1, keepdim=True)
    weights = torch.softmax(scores.masked_fill(mask & ~fully_padded, float("-inf")), dim=-1)
    return weights.masked_fill(fully_padded, 0.0)


def test_padding_correct_answer_passes():
    verdict = ch06.padding(padded_correct)
    assert verdict.ok, verdict
    assert verdict.total == 6


def test_padding_zeroing_nan_rows_afterwards_also_passes():
    def nan_to_zero(scores, key_padding_mask):
        weights = torch.softmax(scores.masked_fill(key_padding_mask[:, None, :], float("-inf")), dim=-1)
        return torch.nan_to_num(weights, nan=0.0)

    assert ch06.padding(nan_to_zero).ok


def test_padding_not_implemented():
    def todo(scores, key_padding_mask):
        raise NotImplementedError

    verdict = ch06.padding(todo)
    assert verdict.not_implemented
    assert "not implemented yet" in verdict.summary()


def test_padding_inverted_mask():
    def inverted(scores, key_padding_mask):
        return padded_correct(scores, ~key_padding_mask)

    assert "mask is inverted" in hints(ch06.padding(inverted))


def test_padding_nan_for_fully_padded_rows():
    def naive(scores, key_padding_mask):
        return torch.softmax(scores.masked_fill(key_padding_mask[:, None, :], float("-inf")), dim=-1)

    verdict = ch06.padding(naive)
    assert verdict.score == 4 / 6  # NaN forward and NaN gradient
    assert "0/0" in hints(verdict)


def test_padding_large_finite_fill_gives_uniform_rows():
    def finite(scores, key_padding_mask):
        return torch.softmax(scores.masked_fill(key_padding_mask[:, None, :], -1e9), dim=-1)

    verdict = ch06.padding(finite)
    assert "uniform weights" in hints(verdict)
    assert len(verdict.failed) == 1


def test_padding_mask_without_query_axis():
    def no_query_axis(scores, key_padding_mask):
        return torch.softmax(scores.masked_fill(key_padding_mask, float("-inf")), dim=-1)

    text = hints(ch06.padding(no_query_axis))
    assert "key_padding_mask[:, None, :]" in text
    assert "(1, B, T_kv)" in text


def test_padding_zeroed_after_softmax():
    def after(scores, key_padding_mask):
        return torch.softmax(scores, dim=-1).masked_fill(key_padding_mask[:, None, :], 0.0)

    assert "after the softmax" in hints(ch06.padding(after))


def test_padding_in_place():
    def in_place(scores, key_padding_mask):
        mask = key_padding_mask[:, None, :]
        fully_padded = mask.all(dim=-1, keepdim=True)
        scores.masked_fill_(mask & ~fully_padded, float("-inf"))
        return torch.softmax(scores, dim=-1).masked_fill(fully_padded, 0.0)

    verdict = ch06.padding(in_place)
    assert [name for name, _ in verdict.failed] == ["scores are not modified in place"]
    assert "in place" in hints(verdict)


def test_checks_are_registered():
    from attention_book.checks import REGISTRY

    assert REGISTRY["ex-06-cross"] is ch06.cross
    assert REGISTRY["ex-06-padding"] is ch06.padding


# ---------------------------------------------------------------- the wrong-answer fixture
from exercise_fixtures import answer_runner, answer_tests, solution_cell  # noqa: E402
from wrong_answers.ch06 import CORRECT_ANSWERS, WRONG_ANSWERS  # noqa: E402

CHECKS = {
    "ex-06-cross": (ch06.cross, ("cross_attention",)),
    "ex-06-padding": (ch06.padding, ("padded_softmax",)),
    "ex-06-find-the-bug-half": (ch06.half_padding, ("padded_weights",)),
}
PRELUDE = "import torch\n"
CASES = [(label, wrong) for label, answers in WRONG_ANSWERS.items() for wrong in answers]


def solution_source(label):
    """The chapter's answer cell for ``label`` (the code cell after its solution-start)."""
    return solution_cell("06", label).source


run_check = answer_runner(CHECKS)


def test_every_coding_exercise_has_six_wrong_answers():
    assert set(WRONG_ANSWERS) == set(CHECKS)
    for label, answers in WRONG_ANSWERS.items():
        assert len(answers) >= 6, f"{label}: {len(answers)} wrong answers"
        assert len({a.name for a in answers}) == len(answers)


@pytest.mark.parametrize("label", sorted(CHECKS))
def test_the_chapters_solution_passes(label):
    verdict = run_check(label, PRELUDE + solution_source(label), f"solution {label}")
    assert verdict.ok, verdict.summary()
    assert verdict.score == 1.0


@pytest.mark.parametrize("label, wrong", CASES, ids=[f"{lab}:{w.name}" for lab, w in CASES])
def test_wrong_answer_fails_with_its_hint(label, wrong):
    verdict = run_check(label, wrong.code, wrong.name)
    text = " | ".join(hint for _, hint in verdict.failed)
    assert not verdict.ok, f"{wrong.name} passed every check"
    assert wrong.hint.lower() in text.lower(), text
    if wrong.non_attempt:
        assert verdict.score == 0.0, f"non-attempt {wrong.name} scored {verdict.score}"
    else:
        assert verdict.score < 1.0


@pytest.mark.parametrize("label", sorted(CHECKS))
def test_not_implemented_scores_zero(label):
    check, names = CHECKS[label]

    def todo(*args, **kwargs):
        raise NotImplementedError(f"{label}: your code here")

    verdict = check(*(todo for _ in names))
    assert verdict.not_implemented and verdict.score == 0.0


# unusual right answers pass (self-check and grader); the find-the-bug code fails the main hidden test
globals().update(answer_tests("06", CHECKS, WRONG_ANSWERS, CORRECT_ANSWERS))
