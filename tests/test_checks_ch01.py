"""Chapter 1's self-checks: the chapter's solutions pass, every plausible wrong answer fails with
its specific hint, and a non-attempt scores exactly 0."""

from __future__ import annotations

import pytest
import torch

from attention_book.checks import HISTORY, ch01
from exercise_fixtures import hints, solution_code, stub_code
from wrong_answers import load_answer
from wrong_answers.ch01 import WRONG_ANSWERS

CHAPTER = "01"
#: label -> (self-check, names of the answer's objects it takes)
CHECKS = {
    "ex-01-one-hot": (ch01.one_hot_embedding, ["embed_by_matrix_product"]),
    "ex-01-positions": (ch01.positions, ["add_positions"]),
    "ex-01-which-token": (ch01.which_token, ["which_token"]),
}
CASES = [(label, answer) for label, answers in WRONG_ANSWERS.items() for answer in answers]


def run(label, code, name="answer"):
    check, names = CHECKS[label]
    namespace = load_answer(code, name)
    return check(*[namespace[n] for n in names])


@pytest.mark.parametrize("label", list(CHECKS))
def test_the_chapters_solution_passes(label):
    verdict = run(label, solution_code(CHAPTER, label), f"solution {label}")
    assert verdict.ok, str(verdict)
    assert verdict.score == 1.0
    assert HISTORY[label] is verdict


@pytest.mark.parametrize("label", list(CHECKS))
def test_the_student_stub_is_not_implemented(label):
    verdict = run(label, stub_code(solution_code(CHAPTER, label), label), f"stub {label}")
    assert verdict.not_implemented, str(verdict)
    assert verdict.score == 0.0
    assert "not implemented yet" in str(verdict)


def test_every_coding_exercise_has_six_wrong_answers():
    assert set(WRONG_ANSWERS) == set(CHECKS)
    for label, answers in WRONG_ANSWERS.items():
        assert len(answers) >= 6, label
        assert len({a.name for a in answers}) == len(answers), f"{label}: duplicate names"


@pytest.mark.parametrize("label,answer", CASES, ids=[f"{label}:{a.name}" for label, a in CASES])
def test_wrong_answer_fails_with_its_hint(label, answer):
    verdict = run(label, answer.code, answer.name)
    assert not verdict.ok, f"{answer.name} passed every check"
    assert answer.hint.lower() in hints(verdict).lower(), str(verdict)
    if answer.non_attempt:
        assert verdict.score == 0.0, str(verdict)
    else:
        assert verdict.score < 1.0


def test_checks_leave_the_readers_random_state_untouched():
    torch.manual_seed(42)
    expected = torch.rand(3)
    torch.manual_seed(42)
    for label in CHECKS:
        run(label, solution_code(CHAPTER, label))
    assert torch.equal(torch.rand(3), expected), "a self-check changed the global random state"
