"""Self-checks for chapter 8 (training the Hello-World model).

* :func:`training_step` - ``ex-08-training-step``: one complete optimisation step
  ``training_step(model, optimizer, inputs, targets) -> float``.
* :func:`accuracy` - ``ex-08-accuracy``: ``last_token_accuracy(logits, targets) -> float``, the
  fraction of sequences whose last next-token prediction is right.
"""

from __future__ import annotations

import copy
import math

import torch
import torch.nn.functional as F

from ..hello_world import HelloWorldModel
from .core import Hint, register

__all__ = ["training_step", "accuracy"]

_VOCAB, _EMBD, _T, _B = 23, 4, 4, 3
_LR = 0.5


def _tiny_problem(seed: int = 8):
    """A small model (23-token vocabulary) and a (3, 4) batch: fast and deterministic."""
    torch.manual_seed(seed)
    model = HelloWorldModel(n_embd=_EMBD, context_length=_T + 1, vocab_size=_VOCAB)
    generator = torch.Generator().manual_seed(seed)
    token_ids = torch.randint(0, _VOCAB, (_B, _T + 1), generator=generator)
    return model, token_ids[:, :-1], token_ids[:, 1:]


def _loss(logits, targets):
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def _reference_steps(model, inputs, targets, steps: int):
    """Parameters after ``steps`` correct SGD steps, and the loss of each step."""
    model = copy.deepcopy(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=_LR)
    losses = []
    for _ in range(steps):
        loss = _loss(model(inputs), targets)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return [p.detach().clone() for p in model.parameters()], losses


def _accumulated_steps(model, inputs, targets, steps: int):
    """What you get without zero_grad: every step adds its gradient to all the earlier ones."""
    model = copy.deepcopy(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=_LR)
    for _ in range(steps):
        _loss(model(inputs), targets).backward()
        optimizer.step()
    return [p.detach().clone() for p in model.parameters()]


def _same(params_a, params_b, atol=1e-5) -> bool:
    return all(torch.allclose(a, b, atol=atol) for a, b in zip(params_a, params_b))


def _as_number(value, what: str) -> float:
    if isinstance(value, torch.Tensor):
        if value.numel() != 1:
            raise Hint(f"{what} should be one number (the mean loss), got a tensor of shape {tuple(value.shape)}")
        return float(value.detach())
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    raise Hint(f"{what} should return a number, got {type(value).__name__}; did you forget `return`?")


@register("ex-08-training-step", "One complete training step")
def training_step(step_function):
    """Check ``training_step(model, optimizer, inputs, targets) -> float`` on a tiny model (SGD)."""
    model, inputs, targets = _tiny_problem()
    expected_params, expected_losses = _reference_steps(model, inputs, targets, steps=2)
    with torch.no_grad():
        logits = model(inputs)
        last_only = F.cross_entropy(logits[:, -1], targets[:, -1]).item()
        against_inputs = _loss(logits, inputs).item()

    student = copy.deepcopy(model)
    optimizer = torch.optim.SGD(student.parameters(), lr=_LR)
    try:
        returned = step_function(student, optimizer, inputs.clone(), targets.clone())
    except RuntimeError as err:
        if "target size" in str(err).lower():
            raise Hint(
                "F.cross_entropy wants scores of shape (N, vocab_size) and targets of shape (N,): "
                "flatten both first, logits.view(-1, logits.size(-1)) and targets.reshape(-1) "
                f"(your code raised: {err})"
            ) from None
        raise
    first_params = [p.detach().clone() for p in student.parameters()]
    first_grads = [None if p.grad is None else p.grad.detach().clone() for p in student.parameters()]
    original = [p.detach().clone() for p in model.parameters()]
    second_returned = step_function(student, optimizer, inputs.clone(), targets.clone())
    second_params = [p.detach().clone() for p in student.parameters()]

    def returns_the_loss():
        if isinstance(returned, torch.Tensor) and returned.requires_grad:
            raise Hint(
                "return loss.item() (a Python float), not the loss tensor: a list of loss tensors "
                "keeps every step's computation graph alive and the memory grows with each step"
            )
        value = _as_number(returned, "training_step(...)")
        if math.isclose(value, expected_losses[0], rel_tol=1e-4, abs_tol=1e-5):
            return
        if math.isclose(value, last_only, rel_tol=1e-4, abs_tol=1e-5):
            raise Hint(
                "the loss covers only the last position: every position predicts its next token, so "
                "compute the loss over all B*T positions: "
                "F.cross_entropy(logits.view(-1, logits.size(-1)), targets.reshape(-1))"
            )
        if math.isclose(value, against_inputs, rel_tol=1e-4, abs_tol=1e-5):
            raise Hint(
                "the loss compares the predictions with the inputs; compare them with the targets "
                "(the inputs shifted by one token): position t must predict token t + 1"
            )
        raise Hint(
            f"the returned loss {value:.4f} is not the next-token cross-entropy of the batch "
            f"before the update ({expected_losses[0]:.4f}): compute logits = model(inputs), then "
            "the loss over all positions, and return loss.item() before or after the update"
        )

    def updates_the_parameters():
        if _same(first_params, original, atol=0.0):
            if all(g is None or not bool(g.abs().sum()) for g in first_grads):
                raise Hint(
                    "the parameters did not change and no gradients were computed: call "
                    "loss.backward() after optimizer.zero_grad(), then optimizer.step()"
                )
            raise Hint(
                "the gradients were computed but the parameters did not change: call "
                "optimizer.step() after loss.backward()"
            )
        reference_one = _reference_steps(model, inputs, targets, steps=1)[0]
        if not _same(first_params, reference_one):
            raise Hint(
                "after one step the parameters differ from one plain optimizer step on the "
                "next-token loss over all positions: did you step twice, or build the loss on "
                "other positions or targets?"
            )

    def gradients_do_not_accumulate():
        _as_number(second_returned, "the second call of training_step(...)")
        if _same(second_params, expected_params):
            return
        if _same(second_params, _accumulated_steps(model, inputs, targets, steps=2)):
            raise Hint(
                "missing optimizer.zero_grad(): PyTorch adds each backward() to the gradients "
                "already stored, so the second step used the sum of both steps' gradients; call "
                "optimizer.zero_grad() before loss.backward()"
            )
        raise Hint(
            "the second step does not match two clean optimisation steps: zero the gradients, "
            "backward, step - once per call"
        )

    return [
        ("returns the loss over all positions as a float", returns_the_loss),
        ("one call makes one optimizer step", updates_the_parameters),
        ("gradients do not pile up from call to call", gradients_do_not_accumulate),
    ]


def _accuracy_case():
    """Logits (4, 3, 6) and targets (4, 3) where every typical mistake gives a different number."""
    B, T, V = 4, 3, 6
    logits = torch.full((B, T, V), -1.0)
    # Last position: sequences 0, 1, 2 right (target 2, 3, 4), sequence 3 wrong (predicts 0).
    targets = torch.tensor([[1, 0, 2], [1, 5, 3], [1, 0, 4], [1, 0, 5]])
    for b, winner in enumerate([2, 3, 4, 0]):
        logits[b, -1, winner] = 3.0
    # Earlier positions: position 0 right everywhere, position 1 right for sequence 0 only.
    logits[:, 0, 1] = 2.0
    logits[0, 1, 0] = 2.0
    logits[1:, 1, 1] = 2.0
    return logits, targets


def _variants(logits, targets):
    B = logits.shape[0]
    return {
        "correct": (logits[:, -1].argmax(-1) == targets[:, -1]).float().mean().item(),
        "count": float((logits[:, -1].argmax(-1) == targets[:, -1]).sum()),
        "all positions": (logits.argmax(-1) == targets).float().mean().item(),
        "first position": (logits[:, 0].argmax(-1) == targets[:, 0]).float().mean().item(),
        "batch": B,
    }


@register("ex-08-accuracy", "Last-token accuracy")
def accuracy(last_token_accuracy):
    """Check ``last_token_accuracy(logits, targets) -> float`` on crafted logits."""
    logits, targets = _accuracy_case()
    expected = _variants(logits, targets)
    result = last_token_accuracy(logits.clone(), targets.clone())
    generator = torch.Generator().manual_seed(3)
    random_logits = torch.randn(5, 4, 9, generator=generator)
    random_targets = torch.randint(0, 9, (5, 4), generator=generator)
    random_targets[:2, -1] = random_logits[:2, -1].argmax(-1)  # at least two right

    def is_a_fraction():
        value = _as_number(result, "last_token_accuracy(...)")
        if math.isclose(value, expected["count"]) and value > 1:
            raise Hint(
                f"you returned {value:g}, the number of right predictions; return the fraction "
                "(divide by the number of sequences, or use .float().mean())"
            )
        if not 0.0 <= value <= 1.0:
            raise Hint(f"an accuracy is a fraction between 0 and 1, got {value:g}")

    def uses_the_last_position():
        is_a_fraction()
        value = _as_number(result, "last_token_accuracy(...)")
        if math.isclose(value, expected["correct"], abs_tol=1e-6):
            return
        if math.isclose(value, expected["all positions"], abs_tol=1e-6):
            raise Hint(
                "you scored every position; the task is the last word: compare "
                "logits[:, -1, :].argmax(dim=-1) with targets[:, -1]"
            )
        if math.isclose(value, expected["first position"], abs_tol=1e-6):
            raise Hint("you scored the first position; the last one is index -1: logits[:, -1, :]")
        raise Hint(
            f"expected {expected['correct']:.2f} for 3 right out of 4, got {value:g}: take the "
            "argmax over the vocabulary (dim=-1) of the last position's scores and compare it with "
            "targets[:, -1]; an argmax over dim=1 picks a position, not a token"
        )

    def works_on_other_shapes():
        value = _as_number(last_token_accuracy(random_logits, random_targets), "last_token_accuracy(...)")
        want = _variants(random_logits, random_targets)["correct"]
        if not math.isclose(value, want, abs_tol=1e-6):
            raise Hint(
                f"on logits of shape (5, 4, 9) expected {want:.2f}, got {value:g}: do not hard-code "
                "the batch size, the sequence length or the vocabulary size"
            )

    return [
        ("returns a fraction between 0 and 1", is_a_fraction),
        ("scores the argmax of the last position", uses_the_last_position),
        ("works for any (B, T, vocab) shape", works_on_other_shapes),
    ]
