"""Chapter 8 self-checks: right answers pass, typical wrong answers get their specific hint."""

import torch
import torch.nn.functional as F

from attention_book.checks import ch08
from attention_book.checks.core import MAIN_VALUE_SHARE


def flat_loss(logits, targets):
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


# ---------------------------------------------------------------- ex-08-training-step
def correct_step(model, optimizer, inputs, targets):
    loss = flat_loss(model(inputs), targets)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.item()


def zero_grad_at_the_end(model, optimizer, inputs, targets):
    loss = flat_loss(model(inputs), targets)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    return loss.item()


def missing_zero_grad(model, optimizer, inputs, targets):
    loss = flat_loss(model(inputs), targets)
    loss.backward()
    optimizer.step()
    return loss.item()


def missing_backward(model, optimizer, inputs, targets):
    loss = flat_loss(model(inputs), targets)
    optimizer.zero_grad()
    optimizer.step()
    return loss.item()


def missing_step(model, optimizer, inputs, targets):
    loss = flat_loss(model(inputs), targets)
    optimizer.zero_grad()
    loss.backward()
    return loss.item()


def last_position_only(model, optimizer, inputs, targets):
    logits = model(inputs)
    loss = F.cross_entropy(logits[:, -1], targets[:, -1])
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.item()


def against_inputs(model, optimizer, inputs, targets):
    loss = flat_loss(model(inputs), inputs)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.item()


def not_flattened(model, optimizer, inputs, targets):
    loss = F.cross_entropy(model(inputs), targets)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.item()


def returns_tensor(model, optimizer, inputs, targets):
    loss = flat_loss(model(inputs), targets)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss


def not_implemented(model, optimizer, inputs, targets):
    raise NotImplementedError("ex-08-training-step: write the training step")


def hints(verdict):
    return " | ".join(hint for _, hint in verdict.failed)


def test_training_step_correct_answers_pass():
    for answer in (correct_step, zero_grad_at_the_end):
        verdict = ch08.training_step(answer)
        assert verdict.ok, (answer.__name__, verdict.failed)
        assert verdict.score == 1.0


def test_training_step_missing_zero_grad():
    verdict = ch08.training_step(missing_zero_grad)
    assert not verdict.ok
    assert "missing optimizer.zero_grad()" in hints(verdict)
    assert "gradients" in hints(verdict)


def test_training_step_missing_backward():
    verdict = ch08.training_step(missing_backward)
    assert "call loss.backward()" in hints(verdict)


def test_training_step_missing_step():
    verdict = ch08.training_step(missing_step)
    assert "call optimizer.step()" in hints(verdict)


def test_training_step_wrong_positions():
    verdict = ch08.training_step(last_position_only)
    assert "covers only the last position" in hints(verdict)


def test_training_step_wrong_targets():
    verdict = ch08.training_step(against_inputs)
    assert "compares the predictions with the inputs" in hints(verdict)


def test_training_step_not_flattened():
    verdict = ch08.training_step(not_flattened)
    assert not verdict.ok
    assert "flatten both first" in hints(verdict)


def test_training_step_returns_tensor():
    verdict = ch08.training_step(returns_tensor)
    assert "return the loss as a Python float" in hints(verdict)
    # 3 of 4 checks pass, but the first (the main value test) fails: capped at half
    assert verdict.score == MAIN_VALUE_SHARE


def test_training_step_not_implemented():
    verdict = ch08.training_step(not_implemented)
    assert verdict.not_implemented and verdict.score == 0.0
    assert "not implemented yet" in str(verdict)


# ---------------------------------------------------------------- ex-08-accuracy
def correct_accuracy(logits, targets):
    return (logits[:, -1, :].argmax(dim=-1) == targets[:, -1]).float().mean().item()


def correct_accuracy_tensor(logits, targets):
    return (logits[:, -1].softmax(-1).argmax(-1) == targets[:, -1]).float().mean()


def count_not_fraction(logits, targets):
    return (logits[:, -1].argmax(-1) == targets[:, -1]).sum().item()


def all_positions(logits, targets):
    return (logits.argmax(-1) == targets).float().mean().item()


def first_position(logits, targets):
    return (logits[:, 0].argmax(-1) == targets[:, 0]).float().mean().item()


def argmax_wrong_dim(logits, targets):
    return (logits.argmax(dim=1)[:, -1] == targets[:, -1]).float().mean().item()


def hard_coded_batch(logits, targets):
    return (logits[:, -1].argmax(-1) == targets[:, -1]).sum().item() / 4


def accuracy_not_implemented(logits, targets):
    raise NotImplementedError("ex-08-accuracy")


def test_accuracy_correct_answers_pass():
    for answer in (correct_accuracy, correct_accuracy_tensor):
        verdict = ch08.accuracy(answer)
        assert verdict.ok, (answer.__name__, verdict.failed)


def test_accuracy_count_instead_of_fraction():
    verdict = ch08.accuracy(count_not_fraction)
    assert "the number of right predictions" in hints(verdict)


def test_accuracy_all_positions():
    verdict = ch08.accuracy(all_positions)
    assert "you scored every position" in hints(verdict)


def test_accuracy_first_position():
    verdict = ch08.accuracy(first_position)
    assert "you scored the first position" in hints(verdict)


def test_accuracy_argmax_over_wrong_dim():
    verdict = ch08.accuracy(argmax_wrong_dim)
    assert "argmax over dim=1 picks a position, not a token" in hints(verdict)


def test_accuracy_hard_coded_batch():
    verdict = ch08.accuracy(hard_coded_batch)
    assert "do not hard-code" in hints(verdict)
    assert verdict.score == 3 / 4


def test_accuracy_not_implemented():
    verdict = ch08.accuracy(accuracy_not_implemented)
    assert verdict.not_implemented


def test_accuracy_non_attempt_scores_zero():
    verdict = ch08.accuracy(lambda logits, targets: 0.0)
    assert verdict.score == 0.0, verdict.summary()


def test_checks_are_registered():
    from attention_book.checks import REGISTRY

    assert {"ex-08-training-step", "ex-08-accuracy", "ex-08-override"} <= set(REGISTRY)


def test_checks_leave_the_random_state_alone():
    torch.manual_seed(0)
    expected = torch.rand(3)
    torch.manual_seed(0)
    ch08.training_step(correct_step)
    ch08.override(lambda model, inputs, last_row: torch.zeros(inputs.shape[0], dtype=torch.long))
    assert torch.equal(torch.rand(3), expected)


# ---------------------------------------------------------------- the wrong-answer fixture
import pytest  # noqa: E402

from exercise_fixtures import solution_code  # noqa: E402
from wrong_answers import load_answer  # noqa: E402
from wrong_answers.ch08 import WRONG_ANSWERS  # noqa: E402

CHECKS = {
    "ex-08-training-step": (ch08.training_step, "training_step"),
    "ex-08-accuracy": (ch08.accuracy, "last_token_accuracy"),
    "ex-08-override": (ch08.override, "predict_with_last_row"),
}
PRELUDE = "import torch\nimport torch.nn.functional as F\n"
CASES = [(label, wrong) for label, answers in WRONG_ANSWERS.items() for wrong in answers]


def run_check(label, code, name):
    check, answer_name = CHECKS[label]
    return check(load_answer(code, name)[answer_name])


def test_every_coding_exercise_has_six_wrong_answers():
    assert set(WRONG_ANSWERS) == set(CHECKS)
    for label, answers in WRONG_ANSWERS.items():
        assert len(answers) >= 6, f"{label}: {len(answers)} wrong answers"
        assert len({a.name for a in answers}) == len(answers)
        assert any(a.non_attempt for a in answers), f"{label}: no non-attempt"


@pytest.mark.parametrize("label", sorted(CHECKS))
def test_the_chapters_solution_passes(label):
    verdict = run_check(label, PRELUDE + solution_code("08", label), f"solution {label}")
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
    check, _ = CHECKS[label]

    def todo(*args, **kwargs):
        raise NotImplementedError(f"{label}: your code here")

    verdict = check(todo)
    assert verdict.not_implemented and verdict.score == 0.0


def test_the_package_s_own_code_is_refused():
    from attention_book.hello_world import last_token_accuracy

    verdict = ch08.accuracy(last_token_accuracy)
    assert verdict.score == 0.0 and verdict.write_your_own
