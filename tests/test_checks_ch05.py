"""The chapter-5 self-checks: right answers pass, typical wrong answers get their specific hint."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from attention_book.checks import ch05

# ---------------------------------------------------------------- ex-05-split-heads


def split_ok(x, num_heads):
    B, T, d_out = x.shape
    return x.view(B, T, num_heads, d_out // num_heads).transpose(1, 2)


def merge_ok(heads):
    B, H, T, hd = heads.shape
    return heads.transpose(1, 2).contiguous().view(B, T, H * hd)


def split_no_transpose(x, num_heads):
    B, T, d_out = x.shape
    return x.view(B, T, num_heads, d_out // num_heads)


def split_direct_view(x, num_heads):
    B, T, d_out = x.shape
    return x.view(B, num_heads, T, d_out // num_heads)


def split_hard_coded(x, num_heads):
    B, T, d_out = x.shape
    return x.view(B, T, 3, d_out // 3).transpose(1, 2)


def merge_view_without_contiguous(heads):
    B, H, T, hd = heads.shape
    return heads.transpose(1, 2).view(B, T, H * hd)


def merge_no_transpose(heads):
    B, H, T, hd = heads.shape
    return heads.reshape(B, T, H * hd)


def not_done(*args):
    raise NotImplementedError("ex-05-split-heads: write your code here")


def test_split_merge_correct_answer_passes():
    verdict = ch05.split_merge(split_ok, merge_ok)
    assert verdict.ok and verdict.score == 1.0, verdict


def test_reshape_based_merge_also_passes():
    merge_reshape = lambda heads: heads.transpose(1, 2).reshape(  # noqa: E731
        heads.shape[0], heads.shape[2], -1)
    assert ch05.split_merge(split_ok, merge_reshape).ok


@pytest.mark.parametrize(
    "split, merge, hint",
    [
        (split_no_transpose, merge_ok, "swap the token and head axes with .transpose(1, 2)"),
        (split_direct_view, merge_ok, "tokens got mixed into heads"),
        (split_hard_coded, merge_ok, "do not hard-code it"),
        (split_ok, merge_view_without_contiguous, "call .contiguous() before .view"),
        (split_ok, merge_no_transpose, "Bring the token axis back first with .transpose(1, 2)"),
    ],
)
def test_split_merge_wrong_answers_get_specific_hints(split, merge, hint):
    verdict = ch05.split_merge(split, merge)
    assert not verdict.ok and verdict.score < 1.0
    assert any(hint in text for _, text in verdict.failed), verdict.failed


def test_split_merge_not_implemented():
    verdict = ch05.split_merge(not_done, not_done)
    assert verdict.not_implemented and verdict.score == 0.0
    assert "not implemented yet" in str(verdict)


# ---------------------------------------------------------------- ex-05-torch-twin


def twin(mha, *, transpose=False, order=(0, 1, 2), out_proj=True, out_bias=True, in_bias=True,
         batch_first=True, share=False):
    """The correct answer with switches that reproduce the typical mistakes."""
    torch_mha = nn.MultiheadAttention(mha.d_out, mha.num_heads, batch_first=batch_first)
    layers = [mha.W_query, mha.W_key, mha.W_value]
    weights = [layers[i].weight.T if transpose else layers[i].weight for i in order]
    with torch.no_grad():
        torch_mha.in_proj_weight.copy_(torch.cat(weights))
        if in_bias and mha.W_query.bias is not None:
            torch_mha.in_proj_bias.copy_(torch.cat([layer.bias for layer in layers]))
        if out_proj:
            torch_mha.out_proj.weight.copy_(mha.out_proj.weight)
        if out_bias:
            torch_mha.out_proj.bias.copy_(mha.out_proj.bias)
    if share:
        torch_mha.out_proj.weight = mha.out_proj.weight
    return torch_mha


def test_torch_twin_correct_answer_passes():
    verdict = ch05.torch_twin(twin)
    assert verdict.ok and verdict.score == 1.0, verdict


def test_torch_twin_does_not_touch_the_readers_random_state():
    torch.manual_seed(42)
    expected = torch.rand(3)
    torch.manual_seed(42)
    ch05.torch_twin(twin)
    assert torch.equal(torch.rand(3), expected)


@pytest.mark.parametrize(
    "options, hint",
    [
        (dict(transpose=True), "transposed matrices"),
        (dict(order=(1, 0, 2)), "right blocks in the wrong order"),
        (dict(out_proj=False), "the output projection is missing"),
        (dict(out_bias=False), "the output projection's bias"),
        (dict(in_bias=False), "with qkv_bias=True the projections have biases too"),
        (dict(batch_first=False), "batch_first=True"),
        (dict(share=True), "shares its tensors with ours"),
    ],
)
def test_torch_twin_wrong_answers_get_specific_hints(options, hint):
    verdict = ch05.torch_twin(lambda mha: twin(mha, **options))
    assert not verdict.ok and verdict.score < 1.0
    assert any(hint in text for _, text in verdict.failed), verdict.failed


def test_torch_twin_wrong_return_type():
    verdict = ch05.torch_twin(lambda mha: None)
    assert not verdict.ok and verdict.score == 0.0
    assert "return a torch.nn.MultiheadAttention" in verdict.failed[0][1]


def test_torch_twin_wrong_size():
    verdict = ch05.torch_twin(lambda mha: nn.MultiheadAttention(mha.d_out, 1, batch_first=True))
    assert any("num_heads=2" in text for _, text in verdict.failed)


def test_torch_twin_not_implemented():
    verdict = ch05.torch_twin(not_done)
    assert verdict.not_implemented and "not implemented yet" in verdict.summary()


# ---------------------------------------------------------------- the wrong-answer fixture
from exercise_fixtures import answer_runner, answer_tests, solution_cell  # noqa: E402
from wrong_answers.ch05 import CORRECT_ANSWERS, WRONG_ANSWERS  # noqa: E402

CHECKS = {
    "ex-05-split-heads": (ch05.split_merge, ("split_heads", "merge_heads")),
    "ex-05-torch-twin": (ch05.torch_twin, ("to_torch_attention",)),
    "ex-05-head-contributions": (ch05.head_contributions, ("head_contributions",)),
    "ex-05-find-the-bug-heads": (ch05.heads_context, ("multihead_context",)),
}
PRELUDE = "import torch\nfrom torch import nn\n"
CASES = [(label, wrong) for label, answers in WRONG_ANSWERS.items() for wrong in answers]


def solution_source(label):
    """The chapter's answer cell for ``label`` (the code cell after its solution-start)."""
    return solution_cell("05", label).source


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
globals().update(answer_tests("05", CHECKS, WRONG_ANSWERS, CORRECT_ANSWERS))
