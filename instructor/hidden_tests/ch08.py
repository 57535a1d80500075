"""Hidden tests of chapter 8 (instructor only: never copied to the book or the student release).

Format: see attention_book.instructor.hidden (and instructor/README.md). Each test gets the
student's namespace ``ns`` and raises Hint("what is wrong and how to fix it") when it fails.
"""

import copy
import math

import torch
import torch.nn.functional as F

from attention_book.hello_world import HelloWorldModel
from attention_book.instructor.hidden import Hint, answer, hidden_test


def _problem(seed, batch_size, num_tokens, vocab_size=17, n_embd=6):
    """A fresh small model and a batch of targets = inputs shifted by one (non-contiguous slices)."""
    with torch.random.fork_rng(devices=[]):  # leave the notebook's random state alone
        torch.manual_seed(seed)
        model = HelloWorldModel(n_embd=n_embd, context_length=num_tokens + 1, vocab_size=vocab_size)
    generator = torch.Generator().manual_seed(seed)
    token_ids = torch.randint(0, vocab_size, (batch_size, num_tokens + 1), generator=generator)
    return model, token_ids[:, :-1], token_ids[:, 1:]  # slices of one tensor: not contiguous


def _loss(model, inputs, targets):
    logits = model(inputs)
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def _number(value):
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        return float(value.detach())
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    raise Hint(f"training_step should return the loss as a number, got {type(value).__name__}")


def _check_steps(training_step, model, inputs, targets, make_optimizer, steps, what):
    reference = copy.deepcopy(model)
    reference_optimizer = make_optimizer(reference)
    student_optimizer = make_optimizer(model)
    for step in range(steps):
        expected_loss = _loss(reference, inputs, targets)
        reference_optimizer.zero_grad()
        expected_loss.backward()
        reference_optimizer.step()
        try:
            returned = training_step(model, student_optimizer, inputs, targets)
        except RuntimeError as err:
            if "view size is not compatible" in str(err):
                raise Hint("the targets here are a slice token_ids[:, 1:], which is not contiguous in memory, "
                           "so targets.view(-1) fails: use targets.reshape(-1) (as in the chapter's batches)"
                           ) from None
            raise
        value = _number(returned)
        if not math.isclose(value, expected_loss.item(), rel_tol=1e-4, abs_tol=1e-5):
            raise Hint(f"{what}: step {step + 1} returned {value:.4f}, expected the loss before the update "
                       f"{expected_loss.item():.4f}")
    for (name, got), want in zip(model.named_parameters(), reference.parameters()):
        if not torch.allclose(got.detach(), want.detach(), atol=1e-5):
            raise Hint(f"{what}: after {steps} steps the parameter {name} differs from {steps} steps of the "
                       "optimizer that was passed in: call optimizer.zero_grad(), loss.backward() and "
                       "optimizer.step() (no update by hand, no fixed learning rate)")


@hidden_test("ex-08-training-step", "uses the optimizer passed in (AdamW, 3 steps)")
def step_with_adamw(ns):
    training_step = answer(ns, "training_step")
    model, inputs, targets = _problem(seed=1, batch_size=2, num_tokens=3)
    _check_steps(training_step, model, inputs.contiguous(), targets.contiguous(),
                 lambda m: torch.optim.AdamW(m.parameters(), lr=0.05), steps=3, what="with AdamW")


@hidden_test("ex-08-training-step", "other sizes and non-contiguous target slices")
def step_other_sizes(ns):
    training_step = answer(ns, "training_step")
    for seed, batch_size, num_tokens in ((2, 1, 1), (3, 5, 4)):
        model, inputs, targets = _problem(seed=seed, batch_size=batch_size, num_tokens=num_tokens, vocab_size=11)
        _check_steps(training_step, model, inputs, targets,
                     lambda m: torch.optim.SGD(m.parameters(), lr=0.3), steps=2,
                     what=f"for a batch of shape ({batch_size}, {num_tokens}) and 11 tokens in the vocabulary")


# ---------------------------------------------------------------- ex-08-accuracy


def _accuracy(last_token_accuracy, logits, targets):
    value = last_token_accuracy(logits.clone(), targets.clone())
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        return float(value.detach())
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    raise Hint(f"last_token_accuracy should return a number, got {type(value).__name__}")


@hidden_test("ex-08-accuracy", "one sequence of one token: 0 or 1")
def accuracy_single(ns):
    last_token_accuracy = answer(ns, "last_token_accuracy")
    logits = torch.tensor([[[0.1, 2.0, -1.0, 0.5]]])  # (1, 1, 4): predicts token 1
    for target, expected in ((1, 1.0), (3, 0.0)):
        value = _accuracy(last_token_accuracy, logits, torch.tensor([[target]]))
        if not math.isclose(value, expected, abs_tol=1e-9):
            raise Hint(f"for one sequence of one token whose best token is 1 and target {target} the accuracy is "
                       f"{expected:g}, got {value:g}: keep the batch and position axes (no .squeeze())")


@hidden_test("ex-08-accuracy", "an exact fraction (3 of 7), not rounded")
def accuracy_fraction(ns):
    last_token_accuracy = answer(ns, "last_token_accuracy")
    generator = torch.Generator().manual_seed(4)
    logits = torch.randn(7, 2, 30, generator=generator)  # (B=7, T=2, V=30)
    predicted = logits[:, -1].argmax(dim=-1)
    targets = torch.randint(0, 30, (7, 2), generator=generator)
    targets[:, -1] = (predicted + 1) % 30  # all wrong ...
    targets[[0, 3, 5], -1] = predicted[[0, 3, 5]]  # ... except 3 of the 7
    value = _accuracy(last_token_accuracy, logits, targets)
    if not math.isclose(value, 3 / 7, abs_tol=1e-6):
        raise Hint(f"3 right out of 7 sequences must give 3/7 = {3 / 7:.6f}, got {value:g}: divide by the "
                   "number of sequences and do not round")
