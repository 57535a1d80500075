"""Chapter 1's self-checks: the chapter's solutions pass, every plausible wrong answer fails with
its specific hint, and a non-attempt scores exactly 0."""

from __future__ import annotations

from attention_book.checks import ch01
from exercise_fixtures import answer_runner, assert_random_state_untouched, fixture_tests
from wrong_answers.ch01 import WRONG_ANSWERS

CHAPTER = "01"
#: label -> (self-check, names of the answer's objects it takes)
CHECKS = {
    "ex-01-one-hot": (ch01.one_hot_embedding, ["embed_by_matrix_product"]),
    "ex-01-positions": (ch01.positions, ["add_positions"]),
    "ex-01-which-token": (ch01.which_token, ["which_token"]),
    "ex-01-bpe-decode": (ch01.bpe_decode, ["decode_tokens"]),
}


run = answer_runner(CHECKS)
# the four tests every chapter's self-checks get
globals().update(fixture_tests(CHAPTER, CHECKS, WRONG_ANSWERS))


def test_checks_leave_the_readers_random_state_untouched():
    assert_random_state_untouched(run, CHAPTER, CHECKS)
