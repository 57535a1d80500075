"""Chapter 3's self-checks: the chapter's solutions pass, every plausible wrong answer fails with
its specific hint, and a non-attempt scores exactly 0."""

from __future__ import annotations

from attention_book.checks import ch03
from exercise_fixtures import answer_runner, answer_tests, assert_random_state_untouched, fixture_tests
from wrong_answers.ch03 import CORRECT_ANSWERS, WRONG_ANSWERS

CHAPTER = "03"
#: label -> (self-check, names of the answer's objects it takes)
CHECKS = {
    "ex-03-stable-softmax": (ch03.stable_softmax, ["my_softmax"]),
    "ex-03-scaled-weights": (ch03.scaled_weights, ["scaled_weights"]),
    "ex-03-temperature": (ch03.temperature_softmax, ["softmax_with_temperature"]),
    "ex-03-attend": (ch03.attend, ["attending_projections"]),
    "ex-03-soft-cap": (ch03.soft_cap, ["cap_scores"]),
    "ex-03-find-the-bug-axis": (ch03.weights_axis, ["attention_weights"]),
}


run = answer_runner(CHECKS)
# the four tests every chapter's self-checks get
globals().update(fixture_tests(CHAPTER, CHECKS, WRONG_ANSWERS))
# unusual right answers pass (self-check and grader); the find-the-bug code fails the main hidden test
globals().update(answer_tests(CHAPTER, CHECKS, WRONG_ANSWERS, CORRECT_ANSWERS))


def test_stable_softmax_accepts_other_correct_spellings():
    for code in ('''
def my_softmax(scores, dim=-1):
    shifted = scores - scores.max(dim=dim, keepdim=True).values
    e = shifted.exp()
    return e / e.sum(dim, keepdim=True)
''', '''
def my_softmax(scores, dim=-1):
    m = torch.amax(scores, dim, keepdim=True)
    return torch.exp(scores - m) / torch.exp(scores - m).sum(dim, keepdim=True)
'''):
        verdict = run("ex-03-stable-softmax", "import torch\n" + code)
        assert verdict.ok, str(verdict)


def test_temperature_accepts_a_ready_made_softmax():
    verdict = run("ex-03-temperature", '''import torch
def softmax_with_temperature(scores, temperature):
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")
    return torch.softmax(scores / temperature, dim=-1)
''')
    assert verdict.ok, str(verdict)


def test_checks_leave_the_readers_random_state_untouched():
    assert_random_state_untouched(run, CHAPTER, CHECKS)
