"""Chapter 2's self-checks: the chapter's solutions pass, every plausible wrong answer fails with
its specific hint, and a non-attempt scores exactly 0."""

from __future__ import annotations

from attention_book.checks import ch02
from exercise_fixtures import answer_runner, answer_tests, assert_random_state_untouched, fixture_tests, hints
from wrong_answers.ch02 import CORRECT_ANSWERS, WRONG_ANSWERS

CHAPTER = "02"
#: label -> (self-check, names of the answer's objects it takes)
CHECKS = {
    "ex-02-score-loop": (ch02.score_loop, ["scores_by_loop"]),
    "ex-02-projected-scores": (ch02.projected_scores, ["projected_scores"]),
    "ex-02-point-at": (ch02.point_at, ["pointing_projections"]),
    "ex-02-additive-scores": (ch02.additive, ["additive_attention_scores"]),
    "ex-02-find-the-bug-batch": (ch02.batch_scores, ["batch_scores"]),
}


run = answer_runner(CHECKS)
# the four tests every chapter's self-checks get
globals().update(fixture_tests(CHAPTER, CHECKS, WRONG_ANSWERS))
# unusual right answers pass (self-check and grader); the find-the-bug code fails the main hidden test
globals().update(answer_tests(CHAPTER, CHECKS, WRONG_ANSWERS, CORRECT_ANSWERS))


def test_score_loop_accepts_comprehensions_and_index_loops():
    for code in ('''
def scores_by_loop(queries, keys):
    return torch.tensor([[torch.dot(q, k).item() for k in keys] for q in queries])
''', '''
def scores_by_loop(queries, keys):
    scores = torch.zeros(len(queries), len(keys))
    i = 0
    while i < len(queries):
        for j in range(len(keys)):
            scores[i, j] = (queries[i] * keys[j]).sum()
        i += 1
    return scores
'''):
        verdict = run("ex-02-score-loop", "import torch\n" + code)
        assert verdict.ok, str(verdict)


def test_score_loop_crash_is_reported_not_raised():
    verdict = run("ex-02-score-loop", '''import torch
def scores_by_loop(queries, keys):
    return queries.undefined_method()
''')
    assert not verdict.ok and "AttributeError" in hints(verdict)


def test_checks_leave_the_readers_random_state_untouched():
    assert_random_state_untouched(run, CHAPTER, CHECKS)
