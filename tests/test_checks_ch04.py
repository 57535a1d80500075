"""Chapter 4's self-checks: the chapter's solutions pass, every plausible wrong answer fails with
its specific hint, and a non-attempt scores exactly 0."""

from __future__ import annotations

from attention_book.checks import ch04
from exercise_fixtures import answer_runner, assert_random_state_untouched, fixture_tests, hints
from wrong_answers.ch04 import WRONG_ANSWERS

CHAPTER = "04"
#: label -> (self-check, names of the answer's objects it takes)
CHECKS = {
    "ex-04-context-vectors": (ch04.context_vectors, ["context_vectors"]),
    "ex-04-copy-weights": (ch04.copy_weights, ["copy_into_linear"]),
    "ex-04-permutation": (ch04.permutation, ["is_permutation_equivariant"]),
}


run = answer_runner(CHECKS)
# the four tests every chapter's self-checks get
globals().update(fixture_tests(CHAPTER, CHECKS, WRONG_ANSWERS))


def test_context_mT_and_einsum_variants_pass():
    for code in ('''
def context_vectors(queries, keys, values):
    return torch.softmax(queries @ keys.mT / keys.shape[-1] ** 0.5, dim=-1) @ values
''', '''
def context_vectors(queries, keys, values):
    scores = torch.einsum("...qd,...kd->...qk", queries, keys) / keys.shape[-1] ** 0.5
    return torch.einsum("...qk,...kv->...qv", scores.softmax(-1), values)
'''):
        verdict = run("ex-04-context-vectors", "import torch\n" + code)
        assert verdict.ok, str(verdict)


def test_context_crash_is_reported_not_raised():
    verdict = run("ex-04-context-vectors", '''import torch
def context_vectors(queries, keys, values):
    return queries @ values  # (5, 3) @ (5, 4)
''')
    assert not verdict.ok and "RuntimeError" in hints(verdict)


def test_copy_into_a_square_module_needs_the_transpose_too():
    """With d_in == d_out nothing crashes: the check must still notice the layout."""
    answer = next(a for a in WRONG_ANSWERS["ex-04-copy-weights"] if a.name == "transposed-only-when-needed")
    verdict = run("ex-04-copy-weights", answer.code)
    assert [name for name, _ in verdict.failed] == [
        "same outputs for square matrices (d_in = d_out = 3) on a batch"]


def test_permutation_accepts_a_module_without_no_grad_and_float_tolerance():
    verdict = run("ex-04-permutation", '''import torch
def is_permutation_equivariant(module, x, permutation):
    a = module(x[permutation]).detach()
    b = module(x)[permutation].detach()
    return bool((a - b).abs().max() < 1e-4)
''')
    assert verdict.ok, str(verdict)


def test_checks_leave_the_readers_random_state_untouched():
    assert_random_state_untouched(run, CHAPTER, CHECKS)
