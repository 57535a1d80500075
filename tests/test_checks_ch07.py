"""Chapter 7 self-checks: right answers pass, typical wrong answers get their specific hint."""

import pytest
import torch

from attention_book.checks import ch07

NEG_INF = float("-inf")


# ---------------------------------------------------------------- ex-07-causal-softmax
def correct_causal(scores):
    T = scores.shape[-1]
    hide = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
    return torch.softmax(scores.masked_fill(hide, NEG_INF), dim=-1)


def correct_causal_renormalise(scores):
    T = scores.shape[-1]
    kept = torch.softmax(scores, dim=-1) * torch.tril(torch.ones(T, T))
    return kept / kept.sum(dim=-1, keepdim=True)


def diagonal_hidden(scores):  # torch.triu(..., diagonal=0): hides the token itself
    T = scores.shape[-1]
    hide = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=0)
    return torch.softmax(scores.masked_fill(hide, NEG_INF), dim=-1)


def after_softmax_no_renorm(scores):
    T = scores.shape[-1]
    return torch.softmax(scores, dim=-1) * torch.tril(torch.ones(T, T))


def wrong_triangle_lower(scores):  # hides the past instead of the future
    T = scores.shape[-1]
    hide = torch.tril(torch.ones(T, T, dtype=torch.bool), diagonal=-1)
    return torch.softmax(scores.masked_fill(hide, NEG_INF), dim=-1)


def wrong_triangle_tril_as_hide(scores):  # uses the "keep" mask as the "hide" mask
    T = scores.shape[-1]
    hide = torch.tril(torch.ones(T, T)).bool()
    return torch.softmax(scores.masked_fill(hide, NEG_INF), dim=-1)


def no_mask(scores):
    return torch.softmax(scores, dim=-1)


def wrong_dim(scores):
    T = scores.shape[-1]
    hide = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
    return torch.softmax(scores.masked_fill(hide, NEG_INF), dim=-2)


def scales_again(scores):
    return correct_causal(scores / scores.shape[-1] ** 0.5)


def mask_from_first_dim(scores):  # T taken from shape[0]: breaks on batches
    T = scores.shape[0]
    hide = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
    return torch.softmax(scores.masked_fill(hide, NEG_INF), dim=-1)


def in_place(scores):
    T = scores.shape[-1]
    scores.masked_fill_(torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1), NEG_INF)
    return torch.softmax(scores, dim=-1)


def not_implemented(scores):
    raise NotImplementedError("ex-07-causal-softmax: ...")


def test_causal_softmax_renormalise_answer_fails_on_large_scores():
    verdict = ch07.causal_softmax(correct_causal_renormalise)
    assert not verdict.ok
    assert verdict.failed == [("large future scores: no NaN, no change", verdict.failed[0][1])]
    assert "turn into NaN" in hints(verdict)


@pytest.mark.parametrize("answer", [correct_causal])
def test_causal_softmax_correct_answers_pass(answer):
    verdict = ch07.causal_softmax(answer)
    assert verdict.ok, verdict.summary()
    assert verdict.score == 1.0


def hints(verdict):
    return " | ".join(hint for _, hint in verdict.failed)


@pytest.mark.parametrize(
    "answer, expected",
    [
        (diagonal_hidden, "the mask hides the diagonal"),
        (after_softmax_no_renorm, "masked after the softmax without renormalising"),
        (wrong_triangle_lower, "wrong triangle"),
        (wrong_triangle_tril_as_hide, "wrong triangle"),
        (no_mask, "tokens can still see the future"),
        (wrong_dim, "take the softmax over the keys, dim=-1"),
        (scales_again, "already scaled"),
        (mask_from_first_dim, "use scores.shape[-1] for T"),
        (in_place, "in place"),
    ],
)
def test_causal_softmax_wrong_answers_get_specific_hints(answer, expected):
    verdict = ch07.causal_softmax(answer)
    assert not verdict.ok
    assert 0.0 <= verdict.score < 1.0
    assert expected in hints(verdict), hints(verdict)


def test_causal_softmax_diagonal_hidden_mentions_nan_row():
    verdict = ch07.causal_softmax(diagonal_hidden)
    assert "row 0 came out as NaN" in hints(verdict)


def test_causal_softmax_wrong_triangle_is_not_called_a_diagonal_problem():
    verdict = ch07.causal_softmax(wrong_triangle_tril_as_hide)
    assert "the mask hides the diagonal" not in hints(verdict)


def test_causal_softmax_not_implemented():
    verdict = ch07.causal_softmax(not_implemented)
    assert verdict.not_implemented
    assert verdict.score == 0.0
    assert "not implemented yet" in verdict.summary()


def test_causal_softmax_crash_is_reported_not_raised():
    verdict = ch07.causal_softmax(lambda scores: scores @ torch.ones(2, 2))
    assert not verdict.ok
    assert "your code raised RuntimeError" in hints(verdict)


def test_causal_softmax_non_tensor_return():
    verdict = ch07.causal_softmax(lambda scores: None)
    assert "did you forget `return`" in hints(verdict)


# ---------------------------------------------------------------- ex-07-decoder-mask
def correct_decoder(pad):
    T = pad.shape[-1]
    return torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1) | pad[:, None, :]


def correct_decoder_via_tril(pad):
    T = pad.shape[-1]
    visible = torch.tril(torch.ones(T, T)).bool() & ~pad.unsqueeze(1)
    return ~visible


def decoder_and(pad):
    T = pad.shape[-1]
    return torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1) & pad[:, None, :]


def decoder_query_axis(pad):
    T = pad.shape[-1]
    return torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1) | pad[:, :, None]


def decoder_inverted(pad):
    return ~correct_decoder(pad)


def decoder_diagonal_hidden(pad):
    T = pad.shape[-1]
    return torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=0) | pad[:, None, :]


def decoder_wrong_triangle(pad):
    T = pad.shape[-1]
    return torch.tril(torch.ones(T, T, dtype=torch.bool), diagonal=-1) | pad[:, None, :]


def decoder_tril_as_hide(pad):
    T = pad.shape[-1]
    return torch.tril(torch.ones(T, T)).bool() | pad[:, None, :]


def decoder_no_causal(pad):
    return pad[:, None, :].expand(-1, pad.shape[-1], -1)


def decoder_no_padding(pad):
    T = pad.shape[-1]
    return torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)


def decoder_float(pad):
    return correct_decoder(pad).float()


def decoder_fixed_size(pad):
    return torch.triu(torch.ones(5, 5, dtype=torch.bool), diagonal=1) | torch.tensor(
        [[0, 0, 0, 0, 0], [0, 0, 0, 1, 1], [0, 0, 1, 1, 1]], dtype=torch.bool)[:, None, :]


def decoder_in_place(pad):
    result = correct_decoder(pad)
    pad.fill_(False)
    return result


def decoder_not_implemented(pad):
    raise NotImplementedError("ex-07-decoder-mask: ...")


@pytest.mark.parametrize("answer", [correct_decoder, correct_decoder_via_tril])
def test_decoder_mask_correct_answers_pass(answer):
    verdict = ch07.decoder_mask(answer)
    assert verdict.ok, verdict.summary()
    assert verdict.score == 1.0


@pytest.mark.parametrize(
    "answer, expected",
    [
        (decoder_and, "use | (or)"),
        (decoder_query_axis, "you hid the padded query rows instead of the padded key columns"),
        (decoder_inverted, "you returned the visible entries"),
        (decoder_diagonal_hidden, "the diagonal is hidden"),
        (decoder_wrong_triangle, "wrong triangle: you hid the past"),
        (decoder_tril_as_hide, "wrong triangle: torch.tril(torch.ones(T, T)) marks the entries"),
        (decoder_no_causal, "the causal part is missing"),
        (decoder_no_padding, "expected a mask of shape (3, 5, 5), got (5, 5) (one (T, T) mask"),
        (decoder_float, "return a boolean tensor"),
        (decoder_fixed_size, "take B and T from key_padding_mask.shape"),
        (decoder_in_place, "changed key_padding_mask in place"),
    ],
)
def test_decoder_mask_wrong_answers_get_specific_hints(answer, expected):
    verdict = ch07.decoder_mask(answer)
    assert not verdict.ok
    assert 0.0 <= verdict.score < 1.0
    assert expected in hints(verdict), hints(verdict)


def test_decoder_mask_padding_part_missing_when_batched():
    def causal_only_batched(pad):
        T = pad.shape[-1]
        return torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1).expand(pad.shape[0], T, T)

    verdict = ch07.decoder_mask(causal_only_batched)
    assert "the padding part is missing" in hints(verdict)


def test_decoder_mask_not_implemented():
    verdict = ch07.decoder_mask(decoder_not_implemented)
    assert verdict.not_implemented
    assert "not implemented yet" in str(verdict)


def test_checks_are_registered():
    from attention_book.checks import REGISTRY

    assert REGISTRY["ex-07-causal-softmax"] is ch07.causal_softmax
    assert REGISTRY["ex-07-decoder-mask"] is ch07.decoder_mask


# ---------------------------------------------------------------- the wrong-answer fixture
from exercise_fixtures import answer_runner, solution_cell  # noqa: E402
from wrong_answers.ch07 import WRONG_ANSWERS  # noqa: E402

CHECKS = {
    "ex-07-causal-softmax": (ch07.causal_softmax, ("causal_weights",)),
    "ex-07-decoder-mask": (ch07.decoder_mask, ("decoder_mask",)),
    "ex-07-decoder-block": (ch07.decoder_block, ("DecoderBlock",)),
    "ex-07-from-memory": (ch07.from_memory, ("CausalMultiHeadAttention",)),
    "ex-07-find-the-bug-buffer": (ch07.mask_buffer, ("CausalWeights",)),
}
PRELUDE = (
    "import torch\nfrom torch import nn\n"
    "from attention_book.multihead import MultiHeadAttention\n"
)
CASES = [(label, wrong) for label, answers in WRONG_ANSWERS.items() for wrong in answers]


def solution_source(label):
    """The chapter's answer cell for ``label`` (the code cell after its solution-start)."""
    return solution_cell("07", label).source


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


# ---------------------------------------------------------------- ex-07-from-memory
from exercise_fixtures import hidden_score, hidden_verdict  # noqa: E402
from wrong_answers.ch07 import FROM_MEMORY, FROM_MEMORY_CORRECT  # noqa: E402

MEMORY = "ex-07-from-memory"
#: the classic mistakes the exercise promises to name, each with the words of its hint
NAMED_MISTAKES = {
    "softmax-over-queries": "softmax over the wrong axis",
    "scaled-by-d_out": "scale by d_out",
    "heads-split-without-transpose": "heads split without the transpose",
    "heads-merged-without-transpose": "heads merged in the wrong order",
    "mask-after-softmax": "mask applied after the softmax",
    "no-output-projection": "no output projection",
    "not-causal": "not causal",
    "diagonal-hidden": "each token hidden from itself",
    "dropout-in-eval-mode": "dropout active in eval mode",
    "fused-sdpa": "a fused kernel used",
}


def test_every_named_mistake_has_a_fixture_with_its_hint():
    by_name = {wrong.name: wrong for wrong in FROM_MEMORY}
    for name, words in NAMED_MISTAKES.items():
        assert name in by_name, f"no wrong answer {name}"
        assert words.lower() in by_name[name].hint.lower(), name
    assert len(FROM_MEMORY_CORRECT) >= 3


@pytest.mark.parametrize("name", sorted(FROM_MEMORY_CORRECT))
def test_unusual_right_answers_pass_the_self_check(name):
    verdict = run_check(MEMORY, FROM_MEMORY_CORRECT[name], name)
    assert verdict.ok, str(verdict)


@pytest.mark.parametrize("name", sorted(FROM_MEMORY_CORRECT) + ["solution"])
def test_right_answers_earn_every_hidden_point(name):
    plain = "import torch\nfrom torch import nn\n"
    code = plain + solution_source(MEMORY) if name == "solution" else FROM_MEMORY_CORRECT[name]
    results, zero = hidden_verdict("07", MEMORY, code, name)
    assert not zero, zero
    assert all(r["passed"] for r in results), [r for r in results if not r["passed"]]
    assert hidden_score(results, MEMORY) == 1.0


@pytest.mark.parametrize("wrong", FROM_MEMORY, ids=[w.name for w in FROM_MEMORY])
def test_the_grader_agrees_with_the_self_check(wrong):
    """Every wrong answer loses hidden points too, and the named mistakes fail the main value test
    (the first test) with the same hint as the self-check's."""
    results, zero = hidden_verdict("07", MEMORY, wrong.code, wrong.name)
    assert zero or not all(r["passed"] for r in results), f"{wrong.name} earns every hidden point"
    assert hidden_score(results, MEMORY, zero) < 1.0
    if wrong.non_attempt:
        assert hidden_score(results, MEMORY, zero) == 0.0
    if wrong.name in NAMED_MISTAKES and not zero:
        failed = " | ".join(r["hint"] for r in results if not r["passed"])
        assert wrong.hint.lower() in failed.lower(), failed


def test_the_reference_formula_is_pytorchs_multihead_attention():
    for index, (B, T, d_in, d_out, H, _, qkv_bias, _) in enumerate(ch07.FROM_MEMORY_SHAPES):
        if d_in != d_out:
            continue
        params = ch07.from_memory_parameters(d_in, d_out, qkv_bias, seed=index)
        x = torch.randn(B, T, d_in, dtype=torch.float64)
        assert torch.allclose(ch07.from_memory_reference(params, x, H),
                              ch07.from_memory_torch(params, x, H), atol=1e-12)


def test_every_mistake_is_told_apart_on_the_main_shape():
    """On the first shape each mistake's output differs from the right one and from the others,
    so its hint cannot be given to another mistake."""
    B, T, d_in, d_out, H, *_ = ch07.FROM_MEMORY_SHAPES[0]
    params = ch07.from_memory_parameters(d_in, d_out, False, seed=1)
    x = torch.randn(B, T, d_in, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    right = ch07.from_memory_reference(params, x, H)
    outputs = {}
    for keywords, name, _ in ch07.FROM_MEMORY_MISTAKES:
        out = ch07.from_memory_reference(params, x, H, **keywords)
        assert not torch.allclose(out, right, equal_nan=True), name
        for other, seen in outputs.items():
            if other[1] != name and {name, other[1]} != {"scale by d_in", "scale by d_out"}:  # d_in = d_out
                assert not torch.allclose(out, seen, equal_nan=True), (name, other)
        outputs[(tuple(sorted(keywords.items())), name)] = out


def test_train_mode_dropout_matches_pytorch_with_the_same_random_stream():
    """What "the same dropout" means here, measured: on the CPU, with the same seed, the chapter's
    solution in training mode gives bit for bit PyTorch's output (its dropout draws one Bernoulli
    number per weight in the same order). The self-check does not rely on it (another order of
    drawing, another device or version changes the stream): it reads the dropped weights."""
    from wrong_answers import load_answer

    Solution = load_answer(PRELUDE + solution_source(MEMORY), "solution")["CausalMultiHeadAttention"]
    torch.manual_seed(0)
    module = Solution(6, 6, 8, 0.3, 2, qkv_bias=True).double()
    torch_mha = torch.nn.MultiheadAttention(6, 2, dropout=0.3, batch_first=True, dtype=torch.float64)
    with torch.no_grad():
        torch_mha.in_proj_weight.copy_(torch.cat([module.W_query.weight, module.W_key.weight,
                                                  module.W_value.weight]))
        torch_mha.in_proj_bias.copy_(torch.cat([module.W_query.bias, module.W_key.bias, module.W_value.bias]))
        torch_mha.out_proj.load_state_dict(module.out_proj.state_dict())
    x = torch.randn(3, 5, 6, dtype=torch.float64)
    hidden = torch.triu(torch.ones(5, 5, dtype=torch.bool), diagonal=1)
    with torch.no_grad():
        torch.manual_seed(5)
        ours = module.train()(x)
        torch.manual_seed(5)
        theirs = torch_mha.train()(x, x, x, attn_mask=hidden, need_weights=True)[0]
    assert torch.allclose(ours, theirs, atol=1e-12)


# ---------------------------------------------------------------- ex-07-find-the-bug-buffer
from exercise_fixtures import answer_tests  # noqa: E402
from wrong_answers.ch07 import CORRECT_ANSWERS, WRONG_ANSWERS as _ALL_WRONG  # noqa: E402

globals().update(answer_tests("07", CHECKS, {"ex-07-find-the-bug-buffer": _ALL_WRONG["ex-07-find-the-bug-buffer"]},
                              {"ex-07-find-the-bug-buffer": CORRECT_ANSWERS["ex-07-find-the-bug-buffer"]}))
